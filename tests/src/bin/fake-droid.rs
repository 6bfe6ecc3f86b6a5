//! `fake-droid`: a stand-in for droid that replays a scenario; see `tests::fake_droid`.

use tests::fake_droid::{Ending, run};

fn main() {
    let code = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => match runtime.block_on(run(std::env::args_os().skip(1).collect())) {
            Ok(Ending::Exit(code)) => code,
            Ok(Ending::Abort) => std::process::abort(),
            Err(e) => {
                eprintln!("fake-droid: {e:#}");
                2
            }
        },
        Err(e) => {
            eprintln!("fake-droid: cannot build a runtime: {e}");
            2
        }
    };
    std::process::exit(code);
}
