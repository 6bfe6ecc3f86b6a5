//! The bridge's `host` setting as a socket address: what `serve` binds, and where a client
//! (`run --via bridge`, `bridge status`, `doctor`) reaches it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// `host:port` as a socket address: an IP (brackets allowed) as it is, a name such as
/// `localhost` resolved to its first address. The error names the host and why.
pub async fn resolve(host: &str, port: u16) -> Result<SocketAddr, String> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    tokio::net::lookup_host((bare, port))
        .await
        .map_err(|e| format!("cannot resolve host {host:?}: {e}"))?
        .next()
        .ok_or_else(|| format!("host {host:?} resolves to no address"))
}

/// Where a client reaches a bridge bound to `bind`: the address itself, except that `0.0.0.0`
/// and `::` mean "this machine", reached through its loopback of the same family.
pub fn client_addr(mut bind: SocketAddr) -> SocketAddr {
    if bind.ip().is_unspecified() {
        bind.set_ip(match bind.ip() {
            IpAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
            IpAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
        });
    }
    bind
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn ips_names_and_the_unspecified_addresses() {
        assert_eq!(
            resolve("127.0.0.2", 9).await.unwrap().to_string(),
            "127.0.0.2:9"
        );
        assert_eq!(resolve("[::1]", 9).await.unwrap().to_string(), "[::1]:9");
        assert!(resolve("localhost", 9).await.unwrap().ip().is_loopback());
        assert!(
            resolve("no-such-host.invalid", 9)
                .await
                .unwrap_err()
                .contains("\"no-such-host.invalid\"")
        );
        let any4 = resolve("0.0.0.0", 9).await.unwrap();
        assert_eq!(client_addr(any4).to_string(), "127.0.0.1:9");
        let any6 = resolve("::", 9).await.unwrap();
        assert_eq!(client_addr(any6).to_string(), "[::1]:9");
        let lan = resolve("192.0.2.7", 9).await.unwrap();
        assert_eq!(client_addr(lan), lan);
    }
}
