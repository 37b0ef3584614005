//! The web chat, a fifth platform on the adapter contract (`docs/web-chat.md`). Built so
//! far: [`auth`], what keeps the page to the person holding the login token (the token,
//! the session cookie derived from it, the Host and Origin checks, the page's security
//! headers). The page, the Server-Sent Events transport and the wiring come next.

pub mod auth;
