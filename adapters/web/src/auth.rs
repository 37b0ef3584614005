//! Who may use the web chat: the person holding the login token. The token (32 random
//! bytes, base64url) is the daemon's, kept 0600 in the home; the page trades it once for a
//! session cookie derived from it (HMAC-SHA256 over a fixed label), so a cookie survives a
//! daemon restart and a new token logs every browser out. Every request's `Host` must name
//! this listener (no DNS rebinding), and every request that changes anything must come with
//! an `Origin` of this listener (no cross-site request forgery).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use http::HeaderMap;
use http::header::{HOST, ORIGIN};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// The session cookie's name.
pub const COOKIE: &str = "hermes_web";
/// How long a browser keeps the cookie: 30 days.
const COOKIE_MAX_AGE_SECS: u64 = 30 * 24 * 3600;
/// What the cookie is the HMAC of, under the token: a new label (a new format) logs
/// everyone out without a new token.
const SESSION_LABEL: &[u8] = b"hermes-web-session-v1";
/// What the page's API header is the HMAC of: another value than the cookie's, since a
/// server on another port of this host receives the cookie (cookies ignore ports) and must
/// not be able to make the header from it.
const API_LABEL: &[u8] = b"hermes-web-api-v1";
/// The header every API request carries: the value the login answered with, which the page
/// keeps in its origin's storage (per port, unlike a cookie).
pub const API_HEADER: &str = "x-hermes-session";

/// Made once per process: the API header's value covers it, so a value taken while the
/// gateway was down (another local user serving a page on its port, which the page's
/// reconnecting would send the header to) is worthless once it is back.
fn process_mark() -> &'static [u8; 16] {
    static MARK: std::sync::OnceLock<[u8; 16]> = std::sync::OnceLock::new();
    MARK.get_or_init(rand::random)
}

/// A fresh login token: 32 random bytes, base64url without padding (43 characters).
pub fn new_token() -> String {
    URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
}

/// Whether `text` has the shape of a token this module made (a file edited by hand into
/// something short or odd is refused rather than trusted).
pub fn is_token(text: &str) -> bool {
    URL_SAFE_NO_PAD
        .decode(text.trim())
        .is_ok_and(|bytes| bytes.len() == 32)
}

/// The login token and what it allows.
#[derive(Clone)]
pub struct Access {
    token: String,
    session: String,
    api: String,
    /// The `Host` values that name this listener (`127.0.0.1:8090`, `localhost:8090`, …).
    hosts: Vec<String>,
    /// The origins that are this listener (`http://127.0.0.1:8090`, …).
    origins: Vec<String>,
    /// `Secure` on the cookie (served through TLS).
    secure: bool,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("hosts", &self.hosts)
            .field("secure", &self.secure)
            .finish_non_exhaustive()
    }
}

/// What a request must carry besides a `Host` of this listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Nothing: the page, its script and style, the login.
    Nothing,
    /// The session cookie: a file the page shows (an `<img>` cannot send a header; its id
    /// is unguessable too).
    Cookie,
    /// The cookie and the API header: everything that reads or changes a conversation.
    Api,
}

/// Why a request is turned away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `Host` names another site (DNS rebinding) or is missing: 421.
    ForeignHost,
    /// A change from another origin, or without one: 403.
    ForeignOrigin,
    /// No session cookie, or not this token's: 401.
    NotLoggedIn,
}

impl Refusal {
    /// The HTTP status to answer with.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::ForeignHost => 421,
            Refusal::ForeignOrigin => 403,
            Refusal::NotLoggedIn => 401,
        }
    }
}

impl Access {
    /// Access to a listener on `port` (all loopback spellings of it), also reachable as
    /// `public_url` (`https://chat.example.org`) when given. `None` when `token` is not a
    /// token [`new_token`] made (an empty or hand-edited file would make a guessable
    /// cookie), or `public_url` is not an http(s) URL.
    pub fn new(token: &str, port: u16, public_url: Option<&str>) -> Option<Access> {
        if !is_token(token) {
            return None;
        }
        let mut hosts: Vec<String> = ["127.0.0.1", "localhost", "[::1]"]
            .iter()
            .map(|h| format!("{h}:{port}"))
            .collect();
        let mut origins: Vec<String> = hosts.iter().map(|h| format!("http://{h}")).collect();
        let mut secure = false;
        if let Some(public) = public_url {
            // As browsers send them: the host with its port only when it is not the
            // scheme's default, and the origin without a path.
            let url = url::Url::parse(public).ok()?;
            if !matches!(url.scheme(), "http" | "https") {
                return None;
            }
            let host = url.host_str()?.to_ascii_lowercase();
            let host = match url.port() {
                Some(port) => format!("{host}:{port}"),
                None => host,
            };
            origins.push(url.origin().ascii_serialization());
            hosts.push(host);
            secure = url.scheme() == "https";
        }
        Some(Access {
            token: token.trim().to_owned(),
            session: hmac_of(token.trim(), SESSION_LABEL),
            api: hmac_of(token.trim(), &[API_LABEL, process_mark()].concat()),
            hosts,
            origins,
            secure,
        })
    }

    /// Whether `offered` is the login token (constant time).
    pub fn is_login(&self, offered: &str) -> bool {
        bool::from(offered.trim().as_bytes().ct_eq(self.token.as_bytes()))
    }

    /// The value of [`API_HEADER`] the login answers with (good until this process ends).
    pub fn api_session(&self) -> &str {
        &self.api
    }

    /// The `Set-Cookie` value that logs a browser in.
    pub fn login_cookie(&self) -> String {
        format!(
            "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age={COOKIE_MAX_AGE_SECS}{}",
            self.session,
            if self.secure { "; Secure" } else { "" }
        )
    }

    /// Whether a request may be served: its `Host` names this listener, a change
    /// (`changes`: any method but GET and HEAD) comes from this origin, and it carries
    /// what `need` says.
    pub fn check(&self, headers: &HeaderMap, changes: bool, need: Need) -> Result<(), Refusal> {
        let host = headers
            .get(HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_ascii_lowercase);
        if !host.is_some_and(|h| self.hosts.contains(&h)) {
            return Err(Refusal::ForeignHost);
        }
        if changes {
            let origin = headers
                .get(ORIGIN)
                .and_then(|o| o.to_str().ok())
                .map(|o| o.trim_end_matches('/').to_ascii_lowercase());
            if !origin.is_some_and(|o| self.origins.contains(&o)) {
                return Err(Refusal::ForeignOrigin);
            }
        }
        let logged_in = match need {
            Need::Nothing => true,
            Need::Cookie => self.has_session(headers),
            Need::Api => self.has_session(headers) && self.has_api_header(headers),
        };
        if logged_in {
            Ok(())
        } else {
            Err(Refusal::NotLoggedIn)
        }
    }

    /// Whether the request carries this token's session cookie.
    fn has_session(&self, headers: &HeaderMap) -> bool {
        headers
            .get_all(http::header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .any(|(name, value)| {
                name == COOKIE && bool::from(value.as_bytes().ct_eq(self.session.as_bytes()))
            })
    }

    /// Whether the request carries this token's API header.
    fn has_api_header(&self, headers: &HeaderMap) -> bool {
        headers
            .get(API_HEADER)
            .is_some_and(|v| bool::from(v.as_bytes().ct_eq(self.api.as_bytes())))
    }
}

/// The HMAC-SHA256 of `label` under `token`, base64url.
fn hmac_of(token: &str, label: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(token.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(label);
    URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
}

/// The headers every answer of the web chat carries: the page runs only its own script
/// and styles (and the browser refuses any HTML-from-a-string sink, Trusted Types, which
/// the page never uses), is never framed, sends no `Referer`, and is not sniffed into
/// another type.
pub const SECURITY_HEADERS: [(&str, &str); 4] = [
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
         connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'; \
         require-trusted-types-for 'script'",
    ),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("x-frame-options", "DENY"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn cookie_of(access: &Access) -> String {
        let set = access.login_cookie();
        set.split(';').next().unwrap().to_owned()
    }

    #[test]
    fn a_token_is_43_characters_of_base64url_and_a_hand_edited_one_is_refused() {
        let token = new_token();
        assert_eq!(token.len(), 43);
        assert!(is_token(&token));
        assert!(is_token(&format!("{token}\n")));
        assert!(!is_token("replace-me"));
        assert!(!is_token(&token[..40]));
        assert_ne!(new_token(), token);
    }

    #[test]
    fn the_cookie_is_derived_from_the_token_and_a_new_token_logs_everyone_out() {
        let token = new_token();
        let access = Access::new(&token, 8090, None).unwrap();
        let cookie = cookie_of(&access);
        assert!(!cookie.contains(&token), "the cookie is not the token");
        assert!(access.login_cookie().contains("HttpOnly; SameSite=Strict"));
        assert!(!access.login_cookie().contains("Secure"));
        let same = Access::new(&token, 8090, None).unwrap();
        let request = headers(&[("host", "127.0.0.1:8090"), ("cookie", &cookie)]);
        assert_eq!(
            same.check(&request, false, Need::Cookie),
            Ok(()),
            "after a restart"
        );
        let rotated = Access::new(&new_token(), 8090, None).unwrap();
        assert_eq!(
            rotated.check(&request, false, Need::Cookie),
            Err(Refusal::NotLoggedIn)
        );
        assert!(access.is_login(&token) && !access.is_login("guess"));
    }

    #[test]
    fn a_foreign_host_or_origin_is_refused_even_with_the_cookie() {
        let access = Access::new(
            &new_token(),
            8090,
            Some("https://chat.example.org:443/chat/"),
        )
        .unwrap();
        assert!(access.login_cookie().ends_with("; Secure"));
        let cookie = cookie_of(&access);
        let ok = |host: &str, origin: &str| {
            access.check(
                &headers(&[("host", host), ("origin", origin), ("cookie", &cookie)]),
                true,
                Need::Cookie,
            )
        };
        assert_eq!(ok("localhost:8090", "http://localhost:8090"), Ok(()));
        assert_eq!(ok("chat.example.org", "https://chat.example.org"), Ok(()));
        // DNS rebinding: an attacker's name resolving to 127.0.0.1.
        assert_eq!(
            ok("evil.example:8090", "http://evil.example:8090"),
            Err(Refusal::ForeignHost)
        );
        // CSRF: a page elsewhere posting to the chat.
        assert_eq!(
            ok("127.0.0.1:8090", "https://evil.example"),
            Err(Refusal::ForeignOrigin)
        );
        assert_eq!(
            access.check(
                &headers(&[("host", "127.0.0.1:8090"), ("cookie", &cookie)]),
                true,
                Need::Cookie
            ),
            Err(Refusal::ForeignOrigin),
            "a change without an Origin"
        );
        assert_eq!(
            access.check(&headers(&[("cookie", &cookie)]), false, Need::Cookie),
            Err(Refusal::ForeignHost)
        );
        assert_eq!(
            access.check(&headers(&[("host", "127.0.0.1:8090")]), false, Need::Cookie),
            Err(Refusal::NotLoggedIn)
        );
        assert_eq!(
            access.check(
                &headers(&[("host", "127.0.0.1:8090")]),
                false,
                Need::Nothing
            ),
            Ok(()),
            "the login page itself needs no cookie"
        );
    }

    #[test]
    fn an_empty_or_hand_edited_token_or_an_odd_public_url_gives_no_access() {
        assert!(Access::new("", 8090, None).is_none());
        assert!(Access::new("  ", 8090, None).is_none());
        assert!(Access::new("replace-me", 8090, None).is_none());
        assert!(Access::new(&new_token(), 8090, Some("chat.example.org")).is_none());
        assert!(Access::new(&new_token(), 8090, Some("ftp://chat.example.org")).is_none());
    }

    #[test]
    fn the_api_header_is_neither_the_cookie_nor_made_from_it_and_needs_the_cookie_too() {
        let access = Access::new(&new_token(), 8090, None).unwrap();
        let cookie = cookie_of(&access);
        assert!(!cookie.contains(access.api_session()));
        let api = access.api_session().to_owned();
        let host = ("host", "127.0.0.1:8090");
        let both = headers(&[host, ("cookie", &cookie), (API_HEADER, &api)]);
        assert_eq!(access.check(&both, false, Need::Api), Ok(()));
        let header_only = headers(&[host, (API_HEADER, &api)]);
        assert_eq!(
            access.check(&header_only, false, Need::Api),
            Err(Refusal::NotLoggedIn)
        );
        let cookie_only = headers(&[host, ("cookie", &cookie)]);
        assert_eq!(
            access.check(&cookie_only, false, Need::Api),
            Err(Refusal::NotLoggedIn)
        );
        assert_eq!(access.check(&cookie_only, false, Need::Cookie), Ok(()));
    }

    #[test]
    fn a_cookie_among_others_is_found_and_a_forged_one_is_not() {
        let access = Access::new(&new_token(), 8090, None).unwrap();
        let cookie = cookie_of(&access);
        let mixed = format!("theme=dark; {cookie}; other=1");
        let request = headers(&[("host", "127.0.0.1:8090"), ("cookie", &mixed)]);
        assert_eq!(access.check(&request, false, Need::Cookie), Ok(()));
        let forged = headers(&[
            ("host", "127.0.0.1:8090"),
            (
                "cookie",
                "hermes_web=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            ),
        ]);
        assert_eq!(
            access.check(&forged, false, Need::Cookie),
            Err(Refusal::NotLoggedIn)
        );
    }
}
