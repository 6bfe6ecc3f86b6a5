//! The checks every request passes before any route sees it (docs/architecture.md#security), in
//! this order:
//! `Host` (403; 400 when missing or repeated), browser origin (403), bearer token (401). A
//! request in absolute form (`POST http://name/execute`) names its host in the target too
//! (RFC 9112 §3.2.2), and that name must pass the same check. A local agent
//! runner's real threat is a web page in the user's browser: through DNS rebinding its requests
//! arrive with `Host: attacker.example`, and drive-by requests carry an `Origin` (or a
//! `Sec-Fetch-Site` of `cross-site`/`same-site`). Command-line clients send neither.
//! `application/json` on POST (415) is checked per route.

use std::net::{IpAddr, SocketAddr};

use http::header::{AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue, ORIGIN, WWW_AUTHENTICATE};
use http::{HeaderMap, Response, StatusCode, Uri};

use crate::config::{BridgeConfig, is_loopback};
use crate::reply::{Body, error};

/// The first check a request with target `uri` and `headers` fails, as the answer to send;
/// `None` when it passes. `local` is the address the connection arrived on (a client may name it
/// in `Host`).
pub(crate) fn refuse(
    uri: &Uri,
    headers: &HeaderMap,
    local: SocketAddr,
    cfg: &BridgeConfig,
) -> Option<Response<Body>> {
    if let Some(r) = check_host(uri, headers, local, cfg) {
        return Some(r);
    }
    if let Some(r) = check_origin(headers, cfg) {
        return Some(r);
    }
    check_token(headers, cfg)
}

/// The host part of a `Host` value (`name`, `name:port`, `[v6]`, `[v6]:port`), lowercased and
/// without a trailing dot.
fn host_name(value: &str) -> Option<String> {
    let v = value.trim();
    let host = if let Some(rest) = v.strip_prefix('[') {
        let end = rest.find(']')?;
        let after = &rest[end + 1..];
        if !(after.is_empty() || after.starts_with(':')) {
            return None;
        }
        &rest[..end]
    } else {
        match v.rsplit_once(':') {
            Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
            Some(_) => return None,
            None => v,
        }
    };
    let host = host.strip_suffix('.').unwrap_or(host);
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

fn check_host(
    uri: &Uri,
    headers: &HeaderMap,
    local: SocketAddr,
    cfg: &BridgeConfig,
) -> Option<Response<Body>> {
    let mut values = headers.get_all(HOST).iter();
    let Some(value) = values.next() else {
        return Some(error(
            StatusCode::BAD_REQUEST,
            "host_required",
            "the Host header is required (HTTP/1.1)",
        ));
    };
    // RFC 9112 §3.2: more than one Host line is a 400; which one would count is ambiguous
    if values.next().is_some() {
        return Some(error(
            StatusCode::BAD_REQUEST,
            "host_required",
            "exactly one Host header is allowed; this request has more than one",
        ));
    }
    let allowed = |shown: &[u8]| {
        std::str::from_utf8(shown)
            .ok()
            .and_then(host_name)
            .is_some_and(|h| {
                h == "localhost"
                    || h.parse::<IpAddr>()
                        .is_ok_and(|ip| is_loopback(ip) || ip == local.ip())
                    || cfg.allowed_hosts.iter().any(|a| a.eq_ignore_ascii_case(&h))
            })
    };
    let (what, refused) = if allowed(value.as_bytes()) {
        match uri.authority() {
            Some(a) if !allowed(a.as_str().as_bytes()) => {
                ("the request target's host", a.as_str().as_bytes())
            }
            _ => return None,
        }
    } else {
        ("Host", value.as_bytes())
    };
    let shown = String::from_utf8_lossy(refused).into_owned();
    Some(error(
        StatusCode::FORBIDDEN,
        "host_not_allowed",
        format!(
            "{what} {shown:?} is not a loopback name; requests through another name are refused \
             (DNS rebinding). Use http://127.0.0.1:PORT, or add the name to allowed_hosts"
        ),
    ))
}

fn check_origin(headers: &HeaderMap, cfg: &BridgeConfig) -> Option<Response<Body>> {
    let allowed = |o: &HeaderValue| {
        o.to_str().is_ok_and(|o| {
            cfg.allowed_origins
                .iter()
                .any(|a| a.eq_ignore_ascii_case(o.trim()))
        })
    };
    match headers.get(ORIGIN) {
        Some(o) if allowed(o) => return None,
        Some(o) => {
            let shown = String::from_utf8_lossy(o.as_bytes()).into_owned();
            return Some(error(
                StatusCode::FORBIDDEN,
                "origin_not_allowed",
                format!(
                    "requests from the web page {shown:?} are refused: a browser page must not \
                     drive a local agent runner. Add the origin to allowed_origins if it is yours"
                ),
            ));
        }
        None => {}
    }
    let site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .map(str::to_ascii_lowercase);
    if matches!(site.as_deref(), Some("cross-site" | "same-site")) {
        return Some(error(
            StatusCode::FORBIDDEN,
            "origin_not_allowed",
            "requests a browser makes on behalf of another site are refused",
        ));
    }
    None
}

fn check_token(headers: &HeaderMap, cfg: &BridgeConfig) -> Option<Response<Body>> {
    let token = cfg.token.as_ref()?;
    let presented = headers
        .get(AUTHORIZATION)
        .map(HeaderValue::as_bytes)
        .and_then(|v| {
            // RFC 9110 §11.1 and RFC 6750 §2.1: the scheme is case-insensitive and followed by
            // one or more spaces
            let (scheme, rest) = v.split_at(v.len().min(7));
            let spaces = rest.iter().take_while(|b| **b == b' ').count();
            scheme
                .eq_ignore_ascii_case(b"bearer ")
                .then_some(&rest[spaces..])
        });
    let (ok, message) = match presented {
        Some(p) if token.matches(p) => (true, ""),
        Some(_) => (false, "the bearer token is wrong"),
        None => (
            false,
            "this bridge requires 'Authorization: Bearer <token>' (the token of its \
             --token-file or DROID_EXECUTOR_TOKEN)",
        ),
    };
    if ok {
        return None;
    }
    let mut res = error(StatusCode::UNAUTHORIZED, "unauthorized", message);
    res.headers_mut().insert(
        WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"droid-executor\""),
    );
    Some(res)
}

/// 415 unless the body is declared `application/json` (parameters such as `charset` allowed).
/// `text/plain` and form bodies are what a web page can send without a CORS preflight.
pub(crate) fn require_json(headers: &HeaderMap) -> Option<Response<Body>> {
    let ct = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let media = ct.map(|c| {
        c.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    });
    if media.as_deref() == Some("application/json") {
        return None;
    }
    Some(error(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        format!(
            "the body must be JSON sent with 'Content-Type: application/json' (got {})",
            ct.map_or_else(|| "no Content-Type".to_owned(), |c| format!("{c:?}"))
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::Token;

    fn local() -> SocketAddr {
        "127.0.0.1:53002".parse().unwrap()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn status(pairs: &[(&'static str, &str)], cfg: &BridgeConfig) -> u16 {
        refuse(&Uri::from_static("/health"), &headers(pairs), local(), cfg)
            .map_or(200, |r| r.status().as_u16())
    }

    #[test]
    fn host_names() {
        assert_eq!(host_name("localhost:53002").as_deref(), Some("localhost"));
        assert_eq!(host_name("LocalHost.").as_deref(), Some("localhost"));
        assert_eq!(host_name("[::1]:80").as_deref(), Some("::1"));
        assert_eq!(host_name("[::1]").as_deref(), Some("::1"));
        assert_eq!(host_name("127.0.0.1").as_deref(), Some("127.0.0.1"));
        assert_eq!(host_name("[::1]x"), None);
        assert_eq!(host_name("a:b:c"), None);
        assert_eq!(host_name(""), None);
    }

    #[test]
    fn loopback_hosts_pass_and_others_are_refused() {
        let cfg = BridgeConfig::default();
        for ok in ["127.0.0.1:53002", "localhost", "[::1]:53002", "127.1.2.3"] {
            assert_eq!(status(&[("host", ok)], &cfg), 200, "{ok}");
        }
        for bad in [
            "attacker.example",
            "attacker.example:53002",
            "127.0.0.1.nip.io",
            "localhost.attacker.example",
            "0.0.0.0",
            "192.168.1.5",
        ] {
            assert_eq!(status(&[("host", bad)], &cfg), 403, "{bad}");
        }
        assert_eq!(status(&[], &cfg), 400);
        let cfg = BridgeConfig {
            allowed_hosts: vec!["devbox.lan".into()],
            ..BridgeConfig::default()
        };
        assert_eq!(status(&[("host", "DevBox.lan:53002")], &cfg), 200);
    }

    #[test]
    fn one_host_and_a_loopback_target_are_required() {
        let cfg = BridgeConfig::default();
        let two = headers(&[("host", "127.0.0.1"), ("host", "127.0.0.1")]);
        let r = refuse(&Uri::from_static("/health"), &two, local(), &cfg).unwrap();
        assert_eq!(r.status(), 400);
        let h = headers(&[("host", "127.0.0.1:53002")]);
        let evil = Uri::from_static("http://attacker.example/health");
        assert_eq!(refuse(&evil, &h, local(), &cfg).unwrap().status(), 403);
        let lo = Uri::from_static("http://localhost:53002/health");
        assert!(refuse(&lo, &h, local(), &cfg).is_none());
    }

    #[test]
    fn browser_origins_are_refused_unless_listed() {
        let cfg = BridgeConfig::default();
        let h = ("host", "127.0.0.1");
        assert_eq!(status(&[h, ("origin", "https://evil.example")], &cfg), 403);
        assert_eq!(status(&[h, ("origin", "null")], &cfg), 403);
        assert_eq!(status(&[h, ("sec-fetch-site", "cross-site")], &cfg), 403);
        assert_eq!(status(&[h, ("sec-fetch-site", "none")], &cfg), 200);
        let cfg = BridgeConfig {
            allowed_origins: vec!["http://localhost:3000".into()],
            ..BridgeConfig::default()
        };
        assert_eq!(status(&[h, ("origin", "http://localhost:3000")], &cfg), 200);
        assert_eq!(status(&[h, ("origin", "http://localhost:3001")], &cfg), 403);
    }

    #[test]
    fn tokens() {
        let cfg = BridgeConfig {
            token: Some(Token::new("0123456789abcdef0123").unwrap()),
            ..BridgeConfig::default()
        };
        let h = ("host", "127.0.0.1");
        assert_eq!(status(&[h], &cfg), 401);
        assert_eq!(status(&[h, ("authorization", "Bearer nope")], &cfg), 401);
        assert_eq!(
            status(&[h, ("authorization", "Basic 0123456789abcdef0123")], &cfg),
            401
        );
        assert_eq!(
            status(&[h, ("authorization", "bearer 0123456789abcdef0123")], &cfg),
            200
        );
        assert_eq!(
            status(
                &[h, ("authorization", "Bearer   0123456789abcdef0123")],
                &cfg
            ),
            200
        );
        let r = refuse(&Uri::from_static("/health"), &headers(&[h]), local(), &cfg).unwrap();
        assert_eq!(
            r.headers()["www-authenticate"],
            "Bearer realm=\"droid-executor\""
        );
    }

    #[test]
    fn json_content_type() {
        assert!(require_json(&headers(&[("content-type", "application/json")])).is_none());
        assert!(
            require_json(&headers(&[(
                "content-type",
                "Application/JSON; charset=utf-8"
            )]))
            .is_none()
        );
        assert_eq!(
            require_json(&headers(&[("content-type", "text/plain")]))
                .unwrap()
                .status(),
            415
        );
        assert_eq!(require_json(&HeaderMap::new()).unwrap().status(), 415);
    }
}
