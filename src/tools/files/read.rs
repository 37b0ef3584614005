//! `read_file {path, offset, limit}`: numbered lines (`N|text`) from `offset` (1-based,
//! default 1), at most `limit` (default 500, at most 2,000), each line cut at 2,000
//! characters; a read stops before 100,000 characters and says where to go on. Binary files
//! are refused with their size.

use std::io::{BufRead, BufReader, Read};
use std::sync::Arc;

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Files, blocking, given, looks_binary};
use crate::tool::{ToolContext, ToolResult, TypedTool};

const DEFAULT_LIMIT: u64 = 500;
const MAX_LIMIT: u64 = 2_000;
const MAX_LINE_CHARS: usize = 2_000;
/// What one read returns at most.
const MAX_READ_CHARS: usize = 100_000;

pub struct ReadFileTool(pub Arc<Files>);

/// `read_file`'s arguments.
#[derive(Deserialize, JsonSchema)]
pub struct ReadFileArgs {
    /// File path (relative to the working directory, or absolute; ~ is the home).
    path: String,
    /// First line to read, from 1 (default 1).
    offset: Option<i64>,
    /// How many lines (default 500, at most 2000).
    limit: Option<i64>,
}

impl TypedTool for ReadFileTool {
    type Args = ReadFileArgs;
    const NAME: &'static str = "read_file";
    const TOOLSET: &'static str = "file";

    fn description(&self) -> String {
        "Read a text file as numbered lines (LINE|text). Use offset and limit for long files; the answer says where to continue. Binary files are refused.".into()
    }

    fn file_scope(&self, args: &ReadFileArgs) -> Option<std::path::PathBuf> {
        self.0.scope(&args.path)
    }

    fn only_reads(&self, _args: &ReadFileArgs) -> bool {
        true
    }

    fn call<'a>(&'a self, args: ReadFileArgs, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let Some(path) = given(&args.path) else {
                return ToolResult::text("error: `path` is required");
            };
            let typed = self.0.resolve(path);
            let path = match self.0.checked(&typed, super::Access::Read) {
                Ok(real) => real,
                Err(e) => return ToolResult::text(format!("error: {e}")),
            };
            if let Some(refused) = self.0.gate(&path, false, ctx).await {
                return refused;
            }
            // Out-of-range numbers are brought into range, as Hermes' pagination does.
            let offset = args.offset.unwrap_or(1).max(1).unsigned_abs();
            let limit = args
                .limit
                .map_or(DEFAULT_LIMIT, |l| l.max(1).unsigned_abs())
                .min(MAX_LIMIT);
            let shown = path.display().to_string();
            match blocking(&ctx.cancel, move || read(&path, offset, limit)).await {
                Ok(text) => ToolResult::text(text),
                Err(e) => ToolResult::text(format!("error: cannot read {shown}: {e}")),
            }
        })
    }
}

fn read(path: &std::path::Path, offset: u64, limit: u64) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if meta.is_dir() {
        return Err("it is a directory (search_files lists files)".into());
    }
    let mut file = super::open::for_reading(path).map_err(|e| e.to_string())?;
    let mut head = vec![0u8; 8 * 1024];
    let n = read_up_to(&mut file, &mut head).map_err(|e| e.to_string())?;
    if looks_binary(&head[..n]) {
        return Err(format!(
            "it is a binary file ({} bytes); read_file shows text only",
            meta.len()
        ));
    }
    let file = super::open::for_reading(path).map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(file);
    let mut out = String::new();
    let mut line = Vec::new();
    let mut number = 0u64;
    let mut shown = 0u64;
    loop {
        line.clear();
        // A line is read up to what can be shown of it; the rest of a huge one is skipped.
        let cap = (4 * MAX_LINE_CHARS + 4) as u64;
        if (&mut reader)
            .take(cap)
            .read_until(b'\n', &mut line)
            .map_err(|e| e.to_string())?
            == 0
        {
            break;
        }
        if line.len() as u64 == cap && line.last() != Some(&b'\n') {
            reader.skip_until(b'\n').map_err(|e| e.to_string())?;
        }
        number += 1;
        if number < offset {
            continue;
        }
        if shown == limit {
            out.push_str(&format!(
                "[… more lines follow: read_file with offset {number} to continue]\n"
            ));
            return Ok(out);
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        let mut cut: String = text.chars().take(MAX_LINE_CHARS).collect();
        if cut.len() < text.len() {
            cut.push_str(" […line cut]");
        }
        let entry = format!("{number}|{cut}\n");
        if out.len() + entry.len() > MAX_READ_CHARS && shown > 0 {
            out.push_str(&format!(
                "[… stopped at {MAX_READ_CHARS} characters: read_file with offset {number} to continue]\n"
            ));
            return Ok(out);
        }
        out.push_str(&entry);
        shown += 1;
    }
    if shown == 0 {
        return Ok(if number == 0 {
            "(the file is empty)".into()
        } else {
            format!("(the file has {number} lines; offset {offset} is past its end)")
        });
    }
    Ok(out)
}

/// Fill `buf` as far as the file goes.
fn read_up_to(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}
