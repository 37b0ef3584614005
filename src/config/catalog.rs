//! What is known about well-known models without asking their provider: how much context
//! each holds (for compression and the history a turn loads, when the configuration does
//! not say) and what Anthropic's and OpenAI's list prices are (for `/usage`, where the
//! provider does not state a call's cost as OpenRouter does). The figures are Hermes 0.19's
//! (`agent/model_metadata.py`, `agent/usage_pricing.py`).

/// The tokens of a call, as `list_cost_micros` prices them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    /// Everything read, the cache included.
    pub prompt: u64,
    /// Of `prompt`, read from the provider's cache.
    pub cached: u64,
    /// Of `prompt`, written to the provider's cache.
    pub cache_write: u64,
    pub completion: u64,
}

/// Context windows, tokens: a key matches when it is part of the (normalised) model name;
/// the longest matching key wins, so `gpt-4.1` is not taken for `gpt-4`.
const CONTEXT_WINDOWS: &[(&str, usize)] = &[
    ("claude-sonnet-5", 1_000_000),
    ("claude-fable", 1_000_000),
    ("claude-opus-4-8", 1_000_000),
    ("claude-opus-4-7", 1_000_000),
    ("claude-opus-4-6", 1_000_000),
    ("claude-sonnet-4-6", 1_000_000),
    ("claude", 200_000),
    ("gpt-5.6", 1_050_000),
    ("gpt-5.5", 1_050_000),
    ("gpt-5.4-mini", 400_000),
    ("gpt-5.4-nano", 400_000),
    ("gpt-5.4", 1_050_000),
    ("gpt-5.3-codex-spark", 128_000),
    ("gpt-5.1-chat", 128_000),
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4", 128_000),
    ("gemini", 1_048_576),
];

/// OpenAI's reasoning models (`o1`, `o3`, `o4-mini`…), named by their start only: as a
/// part of a name, `o3` is found in too many others.
const REASONING_WINDOW: usize = 200_000;

/// How much context `model` holds, when it is a model this table knows.
pub fn context_window(model: &str) -> Option<usize> {
    let name = normalised(model);
    let reasoning = name.len() >= 2
        && name.starts_with('o')
        && name.as_bytes()[1].is_ascii_digit()
        && name[2..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-');
    if reasoning {
        return Some(REASONING_WINDOW);
    }
    CONTEXT_WINDOWS
        .iter()
        .filter(|(key, _)| name.contains(key))
        .max_by_key(|(key, _)| key.len())
        .map(|(_, window)| *window)
}

/// A model's list prices, in thousandths of a dollar per million tokens (so 3.125 $/M is
/// 3,125): tokens × this / 1000 is millionths of a dollar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Price {
    input: u64,
    output: u64,
    cache_read: u64,
    /// `None`: the provider does not price writing to its cache apart (OpenAI): such
    /// tokens are counted as input.
    cache_write: Option<u64>,
}

const fn price(input: u64, output: u64, cache_read: u64, cache_write: Option<u64>) -> Price {
    Price {
        input,
        output,
        cache_read,
        cache_write,
    }
}

/// Anthropic's list prices (Hermes' `anthropic-pricing-2026-05` snapshot; Sonnet 5 at its
/// introductory price, as Hermes has it).
const ANTHROPIC: &[(&str, Price)] = &[
    ("claude-opus-4-8", price(5_000, 25_000, 500, Some(6_250))),
    (
        "claude-opus-4-8-fast",
        price(10_000, 50_000, 1_000, Some(12_500)),
    ),
    ("claude-sonnet-5", price(2_000, 10_000, 200, Some(2_500))),
    ("claude-opus-4-7", price(5_000, 25_000, 500, Some(6_250))),
    ("claude-opus-4-6", price(5_000, 25_000, 500, Some(6_250))),
    ("claude-sonnet-4-6", price(3_000, 15_000, 300, Some(3_750))),
    ("claude-opus-4-5", price(5_000, 25_000, 500, Some(6_250))),
    ("claude-sonnet-4-5", price(3_000, 15_000, 300, Some(3_750))),
    ("claude-haiku-4-5", price(1_000, 5_000, 100, Some(1_250))),
    ("claude-opus-4", price(15_000, 75_000, 1_500, Some(18_750))),
    ("claude-sonnet-4", price(3_000, 15_000, 300, Some(3_750))),
    ("claude-3-5-sonnet", price(3_000, 15_000, 300, Some(3_750))),
    ("claude-3-5-haiku", price(800, 4_000, 80, Some(1_000))),
    ("claude-3-opus", price(15_000, 75_000, 1_500, Some(18_750))),
    ("claude-3-haiku", price(250, 1_250, 30, Some(300))),
];

/// OpenAI's list prices (Hermes' `openai-pricing-2026-03-16` and gpt-5.6 snapshots).
const OPENAI: &[(&str, Price)] = &[
    ("gpt-5.6-sol", price(5_000, 30_000, 500, Some(6_250))),
    ("gpt-5.6-terra", price(2_500, 15_000, 250, Some(3_125))),
    ("gpt-5.6-luna", price(1_000, 6_000, 100, Some(1_250))),
    ("gpt-4o", price(2_500, 10_000, 1_250, None)),
    ("gpt-4o-mini", price(150, 600, 75, None)),
    ("gpt-4.1", price(2_000, 8_000, 500, None)),
    ("gpt-4.1-mini", price(400, 1_600, 100, None)),
    ("gpt-4.1-nano", price(100, 400, 25, None)),
    ("o3", price(10_000, 40_000, 2_500, None)),
    ("o3-mini", price(1_100, 4_400, 550, None)),
];

/// What `usage` cost on `provider`'s `model` at its list price, in millionths of a dollar;
/// `None` where the price is not known (another provider, a model not in the table).
pub fn list_cost_micros(provider: &str, model: &str, usage: &Tokens) -> Option<u64> {
    let table = match provider {
        "anthropic" => ANTHROPIC,
        "openai" => OPENAI,
        _ => return None,
    };
    let price = price_in(table, &normalised(model))?;
    let uncached = usage
        .prompt
        .saturating_sub(usage.cached)
        .saturating_sub(usage.cache_write);
    let (written, written_price) = match price.cache_write {
        Some(p) => (usage.cache_write, p),
        None => (usage.cache_write, price.input),
    };
    let thousandths = u128::from(uncached) * u128::from(price.input)
        + u128::from(usage.cached) * u128::from(price.cache_read)
        + u128::from(written) * u128::from(written_price)
        + u128::from(usage.completion) * u128::from(price.output);
    Some(u64::try_from(thousandths.div_ceil(1_000)).unwrap_or(u64::MAX))
}

/// The row for `name`: its own, else the one of the name without a date suffix
/// (`claude-sonnet-4-5-20250929`, `gpt-4o-2024-08-06`) or an alias suffix (`-latest`,
/// `-pro`, which bill as the model itself).
fn price_in(table: &[(&str, Price)], name: &str) -> Option<Price> {
    let find = |n: &str| table.iter().find(|(key, _)| *key == n).map(|(_, p)| *p);
    if let Some(found) = find(name) {
        return Some(found);
    }
    let mut base = name;
    for suffix in ["-latest", "-pro"] {
        base = base.strip_suffix(suffix).unwrap_or(base);
    }
    // A compact date (-20250929) or an ISO one (-2024-08-06).
    let bytes = base.as_bytes();
    let digits = |s: &[u8]| s.iter().all(u8::is_ascii_digit);
    if bytes.len() > 9 && bytes[bytes.len() - 9] == b'-' && digits(&bytes[bytes.len() - 8..]) {
        base = &base[..base.len() - 9];
    } else if bytes.len() > 11
        && bytes[bytes.len() - 11] == b'-'
        && digits(&bytes[bytes.len() - 10..bytes.len() - 6])
        && bytes[bytes.len() - 6] == b'-'
        && bytes[bytes.len() - 3] == b'-'
    {
        base = &base[..base.len() - 11];
    }
    find(base)
}

/// The model's own name: lower case, without a router's `vendor/` prefix, and a version's
/// dot between digits written as Anthropic's ids write it (`claude-opus-4.7` is
/// `claude-opus-4-7`; OpenAI's `gpt-4.1` keeps its dot).
fn normalised(model: &str) -> String {
    let name = model.trim().to_ascii_lowercase();
    let name = name.rsplit('/').next().unwrap_or(&name).to_owned();
    if !name.starts_with("claude") {
        return name;
    }
    let chars: Vec<char> = name.chars().collect();
    chars
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let between_digits = c == '.'
                && i > 0
                && chars[i - 1].is_ascii_digit()
                && chars.get(i + 1).is_some_and(char::is_ascii_digit);
            if between_digits { '-' } else { c }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_found_by_the_longest_key_in_the_name() {
        assert_eq!(context_window("claude-sonnet-4-6"), Some(1_000_000));
        assert_eq!(context_window("anthropic/claude-opus-4.7"), Some(1_000_000));
        assert_eq!(context_window("claude-haiku-4-5-20251001"), Some(200_000));
        assert_eq!(context_window("gpt-4.1-mini"), Some(1_047_576));
        assert_eq!(context_window("gpt-4o"), Some(128_000));
        assert_eq!(context_window("gpt-5.4-mini"), Some(400_000));
        assert_eq!(context_window("o4-mini"), Some(200_000));
        assert_eq!(context_window("llama3:8b"), None);
        assert_eq!(
            context_window("pro3"),
            None,
            "an o-series name only at the start"
        );
    }

    #[test]
    fn a_turn_is_priced_at_the_list_price_with_its_cache() {
        // Sonnet 4.6: $3 in, $15 out, $0.30 cache read, $3.75 cache write per million.
        let usage = Tokens {
            prompt: 1_000_000 + 2_000_000 + 100_000,
            cached: 2_000_000,
            cache_write: 100_000,
            completion: 10_000,
        };
        let micros = list_cost_micros("anthropic", "claude-sonnet-4-6", &usage).unwrap();
        assert_eq!(micros, 3_000_000 + 600_000 + 375_000 + 150_000);
        // OpenAI prices no cache write apart: those tokens count as input.
        let openai = Tokens {
            prompt: 1_000,
            cached: 0,
            cache_write: 1_000,
            completion: 0,
        };
        assert_eq!(
            list_cost_micros("openai", "gpt-4o-mini", &openai),
            Some(150),
            "1000 tokens at $0.15/M"
        );
    }

    #[test]
    fn names_are_matched_as_the_providers_write_them() {
        let one_in = Tokens {
            prompt: 1_000_000,
            ..Tokens::default()
        };
        let cost = |provider, model| list_cost_micros(provider, model, &one_in);
        assert_eq!(cost("anthropic", "claude-opus-4.7"), Some(5_000_000));
        assert_eq!(
            cost("anthropic", "Claude-Sonnet-4-5-20250929"),
            Some(3_000_000)
        );
        assert_eq!(
            cost("anthropic", "claude-opus-4-20250514"),
            Some(15_000_000)
        );
        assert_eq!(cost("openai", "gpt-4o-2024-08-06"), Some(2_500_000));
        assert_eq!(cost("openai", "openai/gpt-4.1"), Some(2_000_000));
        assert_eq!(cost("openai", "gpt-5.6-sol-pro"), Some(5_000_000));
        assert_eq!(cost("openai", "gpt-9"), None, "not in the table");
        assert_eq!(
            cost("openrouter", "anthropic/claude-sonnet-4-6"),
            None,
            "OpenRouter states its own cost"
        );
        assert_eq!(
            cost("custom", "gpt-4o"),
            None,
            "a custom endpoint's price is its own"
        );
    }
}
