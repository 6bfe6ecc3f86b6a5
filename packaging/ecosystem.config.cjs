// pm2 process file for the droid-executor HTTP bridge, for users who keep pm2 (seed 000 kept its
// Python bridge alive this way: docs/architecture.md#origin). pm2 is optional: `droid-executor
// bridge start` runs the same
// bridge as a daemon on its own, and `droid-executor-bridge.service` beside this file is a
// systemd user unit.
//
// Install:
//   cargo install --locked --path wrapper-cli      # puts droid-executor in ~/.cargo/bin
//   npx pm2 start packaging/ecosystem.config.cjs   # from the repository root
//   npx pm2 save && npx pm2 startup                # optional: start it again at boot
// Check:  curl -s http://127.0.0.1:53002/health
// Logs:   npx pm2 logs droid-executor-bridge  (files: $PM2_HOME/logs, ~/.pm2/logs by default)
// Stop:   npx pm2 stop droid-executor-bridge
//
// Settings come from ~/.config/droid-executor/config.toml and the environment below (the seed's
// names still work: PORT, DROID_TIMEOUT, DROID_CLI_CMD). A binary elsewhere than
// ~/.cargo/bin: set DROID_EXECUTOR_BIN before `pm2 start`.

const os = require("node:os");
const path = require("node:path");

const logs = path.join(process.env.PM2_HOME || path.join(os.homedir(), ".pm2"), "logs");

module.exports = {
  apps: [
    {
      name: "droid-executor-bridge",
      script: process.env.DROID_EXECUTOR_BIN || path.join(os.homedir(), ".cargo", "bin", "droid-executor"),
      args: ["serve"],
      // a native binary: no node, no python in between
      interpreter: "none",
      exec_mode: "fork",
      instances: 1,
      env: {
        PORT: "53002",
        DROID_TIMEOUT: "600",
      },
      // Restart policy: after a crash, with a growing pause (100 ms doubling up to 15 s) so a
      // persistent fault does not spin; a run shorter than 10 s counts as a failed start, and
      // 10 of those in a row stop the retries. Exit status 2 is a configuration error (a
      // non-loopback bind without a token, a bridge already on the port, an unreadable config):
      // restarting cannot fix it, so pm2 (5.x and later) leaves it stopped and the log says why.
      autorestart: true,
      exp_backoff_restart_delay: 100,
      min_uptime: "10s",
      max_restarts: 10,
      stop_exit_codes: [2],
      // pm2 stops with SIGINT, which the bridge treats like SIGTERM: stop accepting, give sync
      // runs their drain grace (30 s, `serve --drain-grace`), then cancel them (15 s for them to
      // stop) and send the answers (5 s): at most 50 s. SIGKILL only after 60 s, so a drain is
      // never cut short (a SIGKILL would leave droid processes behind). A larger --drain-grace
      // needs kill_timeout raised by as much.
      kill_timeout: 60000,
      // Signal the bridge only, not its process tree: background tasks (POST /tasks) run in
      // supervisors the bridge started, and they must outlive a restart of the bridge.
      treekill: false,
      // The bridge logs to stderr; stdout stays empty.
      out_file: path.join(logs, "droid-executor-bridge-out.log"),
      error_file: path.join(logs, "droid-executor-bridge-error.log"),
      time: true,
    },
  ],
};
