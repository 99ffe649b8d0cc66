//! Typed, path-aware access to the parsed JSON. Reading the file through this instead of derived
//! serde structs lets every type error name the full field path (`planExecute.plan.modelConfig`),
//! can tell an explicit `null` from an absent key (stage `toolConfig`), and lets the legacy-key
//! checks see keys that a struct would silently drop.

use serde_json::{Map, Value};

use super::error::DefinitionError;

/// A JSON object together with its path from the file root (`""` for the root).
#[derive(Clone)]
pub struct Obj<'a> {
    map: &'a Map<String, Value>,
    path: String,
}

impl<'a> Obj<'a> {
    pub fn root(map: &'a Map<String, Value>) -> Self {
        Obj { map, path: String::new() }
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// The dotted path of `key` inside this object.
    pub fn field(&self, key: &str) -> String {
        if self.path.is_empty() { key.to_owned() } else { format!("{}.{key}", self.path) }
    }

    pub fn contains(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    pub fn keys(&self) -> impl Iterator<Item = &'a str> + use<'a> {
        self.map.keys().map(String::as_str)
    }

    /// `Err(UnknownField)` naming the first key not in `known`: a typo must not be ignored.
    pub fn only(&self, known: &[&str]) -> Result<(), DefinitionError> {
        match self.keys().find(|k| !known.contains(k)) {
            Some(unknown) => {
                Err(DefinitionError::UnknownField { field: self.field(unknown), expected: known.join(", ") })
            }
            None => Ok(()),
        }
    }

    /// Whether `key` is present and not `null`.
    pub fn is_set(&self, key: &str) -> bool {
        self.value(key).is_some()
    }

    /// The value of `key`; absent and `null` both read as `None` (use [`Self::contains`] to
    /// tell them apart).
    pub fn value(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn wrong_type(&self, key: &str, expected: &'static str, found: &Value) -> DefinitionError {
        DefinitionError::WrongType { field: self.field(key), expected, found: kind_of(found) }
    }

    pub fn str(&self, key: &str) -> Result<Option<&'a str>, DefinitionError> {
        self.value(key).map(|v| v.as_str().ok_or_else(|| self.wrong_type(key, "a string", v))).transpose()
    }

    pub fn bool(&self, key: &str) -> Result<Option<bool>, DefinitionError> {
        self.value(key).map(|v| v.as_bool().ok_or_else(|| self.wrong_type(key, "a boolean", v))).transpose()
    }

    pub fn i64(&self, key: &str) -> Result<Option<i64>, DefinitionError> {
        self.value(key).map(|v| v.as_i64().ok_or_else(|| self.wrong_type(key, "an integer", v))).transpose()
    }

    pub fn f64(&self, key: &str) -> Result<Option<f64>, DefinitionError> {
        self.value(key).map(|v| v.as_f64().ok_or_else(|| self.wrong_type(key, "a number", v))).transpose()
    }

    /// A nested object (absent or `null` → `None`).
    pub fn obj(&self, key: &str) -> Result<Option<Obj<'a>>, DefinitionError> {
        match self.value(key) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(Obj { map, path: self.field(key) })),
            Some(other) => Err(self.wrong_type(key, "an object", other)),
        }
    }

    /// A list whose items are strings or objects (`null` items skipped); each object carries
    /// its path (`field[i]`).
    pub fn str_or_obj_list(&self, key: &str) -> Result<Vec<Either<&'a str, Obj<'a>>>, DefinitionError> {
        let Some(value) = self.value(key) else {
            return Ok(Vec::new());
        };
        let Value::Array(items) = value else {
            return Err(self.wrong_type(key, "an array", value));
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match item {
                Value::Null => {}
                Value::String(s) => out.push(Either::Left(s.as_str())),
                Value::Object(map) => out.push(Either::Right(Obj { map, path: format!("{}[{i}]", self.field(key)) })),
                other => return Err(self.wrong_type(key, "an array of strings or objects", other)),
            }
        }
        Ok(out)
    }

    /// A list of objects (`null` items skipped); each carries its path (`field[i]`).
    pub fn obj_list(&self, key: &str) -> Result<Vec<Obj<'a>>, DefinitionError> {
        let Some(value) = self.value(key) else {
            return Ok(Vec::new());
        };
        let Value::Array(items) = value else {
            return Err(self.wrong_type(key, "an array of objects", value));
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match item {
                Value::Null => {}
                Value::Object(map) => out.push(Obj { map, path: format!("{}[{i}]", self.field(key)) }),
                other => return Err(self.wrong_type(key, "an array of objects", other)),
            }
        }
        Ok(out)
    }

    /// A list of strings; `null` elements are skipped like blank names.
    pub fn str_list(&self, key: &str) -> Result<Vec<&'a str>, DefinitionError> {
        let Some(value) = self.value(key) else {
            return Ok(Vec::new());
        };
        let Value::Array(items) = value else {
            return Err(self.wrong_type(key, "an array of strings", value));
        };
        items
            .iter()
            .filter(|item| !item.is_null())
            .map(|item| item.as_str().ok_or_else(|| self.wrong_type(key, "an array of strings", item)))
            .collect()
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a fractional number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Trimmed, lower-cased, blanks dropped, first occurrence kept (tool and skill names).
pub fn normalize_names<'s>(names: impl IntoIterator<Item = &'s str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in names {
        let name = name.trim().to_lowercase();
        if !name.is_empty() && !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// The unit variant of `T` whose serde name is exactly `name`. Agent files spell enums as their
/// types serialise, so reading a file and writing one ([`super::file`]) share one spelling.
pub fn named<T: serde::de::DeserializeOwned>(name: &str) -> Option<T> {
    use serde::de::IntoDeserializer;
    T::deserialize(IntoDeserializer::<serde::de::value::Error>::into_deserializer(name)).ok()
}

/// `None` for blank strings: the schema treats blank like absent for optional texts.
pub fn non_blank(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.trim().is_empty())
}

/// One item of [`Obj::str_or_obj_list`].
pub enum Either<L, R> {
    Left(L),
    Right(R),
}
