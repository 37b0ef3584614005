//! `hermes-format`: what adapters render the model's Markdown with.
//!
//! * [`walk`] runs the pulldown-cmark events of a Markdown text through a [`Dialect`] (the
//!   few tags a chat platform knows: bold, italic, code, links, quotes), handling what
//!   platforms have no tags for (headings, lists, rules) the same way everywhere.
//! * [`chunk`] splits Markdown under a length limit, keeping code fences balanced.
//! * [`fit`] puts both together: chunks whose *rendered* length fits the platform's limit,
//!   so escapes and long link targets can never push a message over it.

pub mod backticks;
mod chunk;
mod fit;
mod walk;

pub use chunk::chunk;
pub use fit::fit;
pub use walk::{Dialect, walk};
