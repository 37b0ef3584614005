//! Reading a download under a size cap, stopped as soon as it passes the cap: every
//! adapter's `fetch_media` ends in this loop.

use futures_util::{Stream, StreamExt};

use crate::{FetchError, SendError};

/// The bytes of `chunks`, refusing more than `max` (checked against `declared`, the size the
/// platform or the `Content-Length` announced, before reading anything). `failed` turns a
/// chunk's error into a [`SendError`] (without the URL, where it names a token).
pub async fn read_capped<B, E>(
    chunks: impl Stream<Item = Result<B, E>>,
    declared: Option<u64>,
    max: u64,
    failed: impl Fn(E) -> SendError,
) -> Result<Vec<u8>, FetchError>
where
    B: AsRef<[u8]>,
{
    if let Some(size) = declared.filter(|&size| size > max) {
        return Err(FetchError::TooLarge { size, max });
    }
    let mut bytes = Vec::with_capacity(declared.unwrap_or(0).min(max) as usize);
    let mut chunks = std::pin::pin!(chunks);
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(&failed)?;
        let chunk = chunk.as_ref();
        let size = (bytes.len() + chunk.len()) as u64;
        if size > max {
            return Err(FetchError::TooLarge { size, max });
        }
        bytes.extend_from_slice(chunk);
    }
    Ok(bytes)
}

/// The same, written to `out` as the chunks come instead of held: how many bytes were
/// written. What was written before a failure stays in `out`.
pub async fn copy_capped<B, E>(
    chunks: impl Stream<Item = Result<B, E>>,
    declared: Option<u64>,
    max: u64,
    out: &mut (dyn tokio::io::AsyncWrite + Unpin + Send),
    failed: impl Fn(E) -> SendError,
) -> Result<u64, FetchError>
where
    B: AsRef<[u8]>,
{
    use tokio::io::AsyncWriteExt;
    if let Some(size) = declared.filter(|&size| size > max) {
        return Err(FetchError::TooLarge { size, max });
    }
    let mut written = 0u64;
    let mut chunks = std::pin::pin!(chunks);
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(&failed)?;
        let chunk = chunk.as_ref();
        let size = written + chunk.len() as u64;
        if size > max {
            return Err(FetchError::TooLarge { size, max });
        }
        out.write_all(chunk).await.map_err(write_failed)?;
        written = size;
    }
    out.flush().await.map_err(write_failed)?;
    Ok(written)
}

/// A local write that failed (the disk full, most likely).
pub(crate) fn write_failed(e: std::io::Error) -> FetchError {
    FetchError::Failed(SendError::Rejected(format!("writing it failed: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(sizes: &[usize]) -> impl Stream<Item = Result<Vec<u8>, String>> {
        futures_util::stream::iter(sizes.iter().map(|&n| Ok(vec![7u8; n])).collect::<Vec<_>>())
    }

    fn failed(e: String) -> SendError {
        SendError::Transient(e)
    }

    #[tokio::test]
    async fn a_copy_stops_at_the_cap_and_keeps_what_it_wrote() {
        let mut out = Vec::new();
        let copied = copy_capped(chunks(&[3, 4]), None, 7, &mut out, failed).await;
        assert_eq!((copied, out.len()), (Ok(7), 7));
        let mut out = Vec::new();
        let copied = copy_capped(chunks(&[3, 4, 1]), None, 7, &mut out, failed).await;
        assert_eq!(copied, Err(FetchError::TooLarge { size: 8, max: 7 }));
        let mut out = Vec::new();
        let refused = copy_capped(chunks(&[1]), Some(100), 7, &mut out, failed).await;
        assert_eq!(refused, Err(FetchError::TooLarge { size: 100, max: 7 }));
        assert!(out.is_empty(), "refused before reading");
    }

    #[tokio::test]
    async fn a_download_stops_at_the_cap() {
        let whole = read_capped(chunks(&[3, 4]), None, 7, failed).await.unwrap();
        assert_eq!(whole.len(), 7);
        assert_eq!(
            read_capped(chunks(&[3, 4, 1]), None, 7, failed).await,
            Err(FetchError::TooLarge { size: 8, max: 7 })
        );
        assert_eq!(
            read_capped(chunks(&[1]), Some(100), 7, failed).await,
            Err(FetchError::TooLarge { size: 100, max: 7 }),
            "refused before reading"
        );
    }
}
