//! A small, deterministic, structure-aware mutator: the stable-toolchain stand-in for libFuzzer.
//!
//! From a seed corpus and a 64-bit seed it derives any number of inputs, each the same on every
//! machine: byte-level mutations (flips, interesting bytes, deletions, duplications, splices,
//! truncation, dictionary tokens inserted anywhere) and JSON-aware ones (a node of a parsed seed
//! replaced by a hostile value, keys added or dropped, deep nesting, then re-serialised compactly
//! or pretty), stacked one to four deep.

use serde_json::{Map, Value, json};

/// SplitMix64: tiny, fast, good enough to spread mutations; the same sequence everywhere.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator whose whole sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 uniformly distributed bits of the sequence.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True with probability `1 / one_in` (`one_in > 0`).
    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }

    /// A uniformly chosen element of `items`, which must not be empty.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// A stable 64-bit hash of a name (FNV-1a), to give every target its own sequence.
pub fn seed_of(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Tokens every target's inputs are made of, plus the target's own `dictionary`.
const COMMON_TOKENS: &[&str] = &[
    "\"",
    "\\",
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "\n",
    "\r\n",
    "\r",
    "\t",
    " ",
    "null",
    "true",
    "false",
    "0",
    "-1",
    "1e308",
    "1e999",
    "-0",
    "18446744073709551616",
    "9223372036854775808",
    "0.1",
    "\"\"",
    "\\u0000",
    "\\ud800",
    "\\udc00\\ud800",
    "\u{feff}",
    "é",
    "上海",
    "🦀",
    "\u{2028}",
    "\u{0}",
    "\u{7f}",
    "\u{fffd}",
];

/// Hostile JSON values a node can be replaced with.
fn hostile_value(rng: &mut Rng, keys: &[&str]) -> Value {
    match rng.below(14) {
        0 => Value::Null,
        1 => json!(rng.chance(2)),
        2 => json!(*rng.pick(&[0_i64, -1, 1, i64::MAX, i64::MIN, 4096, 65_536])),
        3 => json!(*rng.pick(&[u64::MAX, 1 << 53])),
        4 => json!(*rng.pick(&[0.5_f64, -1e308, 1e-320, 3.000_000_000_000_000_4])),
        5 => json!(""),
        6 => json!(*rng.pick(&[" ", "\n\n", "   \t", "null", "[DONE]", "---", "\"\"\""])),
        7 => json!(*rng.pick(&["é上海🦀", "\u{0}\u{1}\u{1f}", "\u{2028}\u{2029}", "\r\n\r\ndata: x\n\n"])),
        8 => json!("x".repeat(*rng.pick(&[64_usize, 1000, 70_000]))),
        9 => json!([]),
        10 => json!({}),
        11 => {
            let key = *rng.pick(keys);
            json!({ key: hostile_scalar(rng) })
        }
        12 => Value::Array((0..rng.below(5)).map(|_| hostile_scalar(rng)).collect()),
        _ => {
            // Deep nesting: parsers with recursion must survive it (serde_json stops at 128).
            let mut v = Value::Null;
            for _ in 0..*rng.pick(&[10_usize, 100, 130, 300]) {
                v = if rng.chance(2) { json!([v]) } else { json!({"a": v}) };
            }
            v
        }
    }
}

fn hostile_scalar(rng: &mut Rng) -> Value {
    match rng.below(5) {
        0 => Value::Null,
        1 => json!(rng.next_u64() as i64),
        2 => json!(""),
        3 => json!("x y"),
        _ => json!(rng.chance(2)),
    }
}

/// Every JSON node of `value` as a path of steps.
fn paths(value: &Value, prefix: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    out.push(prefix.clone());
    match value {
        Value::Object(map) => {
            for key in map.keys() {
                prefix.push(Step::Key(key.clone()));
                paths(&map[key], prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                prefix.push(Step::Index(i));
                paths(item, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

fn node_mut<'a>(value: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    let mut node = value;
    for step in path {
        node = match (step, node) {
            (Step::Key(k), Value::Object(map)) => map.get_mut(k)?,
            (Step::Index(i), Value::Array(items)) => items.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(node)
}

/// One JSON-aware mutation of `value` (in place).
fn mutate_json(value: &mut Value, rng: &mut Rng, keys: &[&str]) {
    let mut all = Vec::new();
    paths(value, &mut Vec::new(), &mut all);
    let path = rng.pick(&all).clone();
    let Some(node) = node_mut(value, &path) else { return };
    match rng.below(6) {
        0 | 1 => *node = hostile_value(rng, keys),
        2 => {
            if let Value::Object(map) = node {
                let key = (*rng.pick(keys)).to_owned();
                map.insert(key, hostile_value(rng, keys));
            } else {
                *node = hostile_value(rng, keys);
            }
        }
        3 => match node {
            Value::Object(map) if !map.is_empty() => {
                let key = map.keys().nth(rng.below(map.len())).cloned().unwrap_or_default();
                map.shift_remove(&key);
            }
            Value::Array(items) if !items.is_empty() => {
                let i = rng.below(items.len());
                items.remove(i);
            }
            _ => *node = Value::Null,
        },
        4 => {
            // Duplicate into an array or repeat array items.
            let copy = node.clone();
            *node = match copy {
                Value::Array(items) => Value::Array(items.iter().chain(items.iter()).cloned().collect()),
                other => Value::Array(vec![other.clone(), other]),
            };
        }
        _ => {
            // Wrap in an object under a known key (type confusion one level down).
            let mut map = Map::new();
            map.insert((*rng.pick(keys)).to_owned(), node.clone());
            *node = Value::Object(map);
        }
    }
}

/// One byte-level mutation of `data` (in place). `tokens` are inserted or overwrite bytes.
fn mutate_bytes(data: &mut Vec<u8>, rng: &mut Rng, tokens: &[&str], other: &[u8]) {
    let len = data.len();
    match rng.below(9) {
        0 if len > 0 => {
            let i = rng.below(len);
            data[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            data[i] = *rng.pick(&[0u8, 0xff, 0x80, 0xc3, 0xe4, b'"', b'\\', b'{', b'}', b'\n', b'\r', b':', b'#']);
        }
        2 => {
            let token = rng.pick(tokens).as_bytes();
            let at = rng.below(len + 1);
            data.splice(at..at, token.iter().copied());
        }
        3 if len > 0 => {
            let start = rng.below(len);
            let end = (start + 1 + rng.below(16.min(len - start))).min(len);
            data.drain(start..end);
        }
        4 if len > 0 => {
            let start = rng.below(len);
            let end = (start + 1 + rng.below(64.min(len - start))).min(len);
            let copy: Vec<u8> = data[start..end].to_vec();
            let at = rng.below(len + 1);
            let times = 1 + rng.below(8);
            for _ in 0..times {
                data.splice(at..at, copy.iter().copied());
            }
        }
        5 if len > 0 => data.truncate(rng.below(len)),
        6 if !other.is_empty() => {
            // Splice: a prefix of this input with a suffix of another seed.
            let cut = rng.below(len + 1);
            let from = rng.below(other.len());
            data.truncate(cut);
            data.extend_from_slice(&other[from..]);
        }
        7 if len > 0 => {
            let token = rng.pick(tokens).as_bytes();
            let at = rng.below(len);
            let end = (at + token.len()).min(len);
            data.splice(at..end, token.iter().copied());
        }
        _ => data.extend_from_slice(rng.pick(tokens).as_bytes()),
    }
}

/// Derives one input from `seeds`: a JSON-aware mutation when the picked seed is JSON (and the
/// dice say so), then one to four byte-level mutations. `dictionary` holds the target's own
/// tokens (field names, markers).
pub fn mutant(seeds: &[Vec<u8>], dictionary: &[&str], rng: &mut Rng) -> Vec<u8> {
    let tokens: Vec<&str> = COMMON_TOKENS.iter().chain(dictionary).copied().collect();
    let keys: Vec<&str> = if dictionary.is_empty() { vec!["a"] } else { dictionary.to_vec() };
    let seed = if seeds.is_empty() { Vec::new() } else { rng.pick(seeds).clone() };
    let other = if seeds.is_empty() { Vec::new() } else { rng.pick(seeds).clone() };
    let mut data = seed;
    if rng.chance(2)
        && let Ok(mut value) = serde_json::from_slice::<Value>(&data)
    {
        for _ in 0..1 + rng.below(3) {
            mutate_json(&mut value, rng, &keys);
        }
        data = if rng.chance(3) { serde_json::to_vec_pretty(&value) } else { serde_json::to_vec(&value) }
            .unwrap_or_default();
        if rng.chance(2) {
            return data;
        }
    }
    for _ in 0..1 + rng.below(4) {
        mutate_bytes(&mut data, rng, &tokens, &other);
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutants_are_reproducible() {
        let seeds = vec![br#"{"a":[1,2,{"b":"c"}]}"#.to_vec(), b"plain text".to_vec()];
        let run = |seed| {
            let mut rng = Rng::new(seed);
            (0..200).map(|_| mutant(&seeds, &["a", "b"], &mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        assert!(run(7).iter().any(|m| serde_json::from_slice::<Value>(m).is_ok()), "some stay valid JSON");
        assert!(run(7).iter().any(|m| serde_json::from_slice::<Value>(m).is_err()), "some do not");
    }
}
