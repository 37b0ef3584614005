//! The tokens each turn took, for `/usage`: one row per turn (its session, when, the model,
//! prompt, completion, cache read and write tokens, and the cost where the provider says it),
//! summed per session and since a moment.

use rusqlite::params;

use super::db::Row;

use super::{Store, StoreError, now_ms};
use crate::llm::Usage;

impl Store {
    /// Record what a turn of session `session_id` took on `model`.
    pub async fn usage_add(
        &self,
        session_id: String,
        model: String,
        usage: Usage,
    ) -> Result<(), StoreError> {
        self.call_relaxed(move |conn| {
            conn.prepare_cached(
                "INSERT INTO usage (session_id, at, model, prompt, completion, cached,
                    cache_write, cost_micros)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?
            .execute(params![
                session_id,
                now_ms(),
                model,
                usage.prompt as i64,
                usage.completion as i64,
                usage.cached as i64,
                usage.cache_write as i64,
                usage.cost_micros as i64
            ])?;
            Ok(())
        })
        .await
    }

    /// What session `session_id` took, and what every session took since `since_ms`.
    pub async fn usage_totals(
        &self,
        session_id: Option<String>,
        since_ms: i64,
    ) -> Result<(Usage, Usage), StoreError> {
        self.call(move |conn| {
            let sum = |row: &Row<'_>| -> rusqlite::Result<Usage> {
                let n = |i: usize| -> rusqlite::Result<u64> {
                    Ok(row.get::<_, Option<i64>>(i)?.unwrap_or(0).max(0) as u64)
                };
                Ok(Usage {
                    prompt: n(0)?,
                    completion: n(1)?,
                    cached: n(2)?,
                    cache_write: n(3)?,
                    cost_micros: n(4)?,
                })
            };
            let session = match session_id {
                Some(id) => conn
                    .prepare_cached(
                        "SELECT CAST(sum(prompt) AS BIGINT), CAST(sum(completion) AS BIGINT), CAST(sum(cached) AS BIGINT),
                     CAST(sum(cache_write) AS BIGINT), CAST(sum(cost_micros) AS BIGINT) FROM usage WHERE session_id = ?1",
                    )?
                    .query_row([id], sum)?,
                None => Usage::default(),
            };
            let since = conn
                .prepare_cached(
                    "SELECT CAST(sum(prompt) AS BIGINT), CAST(sum(completion) AS BIGINT), CAST(sum(cached) AS BIGINT),
                     CAST(sum(cache_write) AS BIGINT), CAST(sum(cost_micros) AS BIGINT) FROM usage WHERE at >= ?1",
                )?
                .query_row([since_ms], sum)?;
            Ok((session, since))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn usage_adds_up_per_session_and_since_a_moment(store: Store) {
        let turn = Usage {
            prompt: 100,
            completion: 20,
            cached: 60,
            cache_write: 5,
            cost_micros: 1_500,
        };
        store
            .usage_add("s1".into(), "m".into(), turn)
            .await
            .unwrap();
        store
            .usage_add("s1".into(), "m".into(), turn)
            .await
            .unwrap();
        store
            .usage_add("s2".into(), "m".into(), turn)
            .await
            .unwrap();
        let (session, today) = store.usage_totals(Some("s1".into()), 0).await.unwrap();
        assert_eq!(session.prompt, 200);
        assert_eq!(
            (
                today.prompt,
                today.completion,
                today.cached,
                today.cache_write,
                today.cost_micros
            ),
            (300, 60, 180, 15, 4_500)
        );
        let (_, later) = store.usage_totals(None, now_ms() + 60_000).await.unwrap();
        assert_eq!(later, Usage::default());
    }

    crate::store::on_both_engines!(usage_adds_up_per_session_and_since_a_moment,);
}
