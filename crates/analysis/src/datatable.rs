//! Google Visualization DataTable JSON, the shape XProf's tool endpoints answer with
//! (`{"cols":[…],"rows":[{"c":[{"v":…}]}],"p":{…}}`), for `--format xprof-json`.
//!
//! The one design decision to know: property values are strings, as in XProf, and
//! columns are declared once with their gviz type; cells are plain JSON values.

use serde_json::{Map, Value, json};

/// A DataTable under construction.
#[derive(Clone, Debug, Default)]
pub struct DataTable {
    cols: Vec<Value>,
    rows: Vec<Value>,
    properties: Map<String, Value>,
}

impl DataTable {
    /// An empty table.
    pub fn new() -> DataTable {
        DataTable::default()
    }

    /// A table with these columns declared, each as `(id, label, gviz type)`.
    pub fn with_columns(columns: &[(&str, &str, &str)]) -> DataTable {
        let mut table = DataTable::new();
        for (id, label, kind) in columns {
            table.column(id, label, kind);
        }
        table
    }

    /// Declares a column: id, label and gviz type (`string`, `number`, `boolean`).
    pub fn column(&mut self, id: &str, label: &str, kind: &str) -> &mut DataTable {
        self.cols.push(json!({"id": id, "label": label, "type": kind}));
        self
    }

    /// Declares a column with column properties (e.g. `{"role": "tooltip"}`).
    pub fn column_with(&mut self, id: &str, label: &str, kind: &str, properties: Value) -> &mut DataTable {
        self.cols.push(json!({"id": id, "label": label, "type": kind, "p": properties}));
        self
    }

    /// Appends a row of cell values.
    pub fn row(&mut self, cells: Vec<Value>) -> &mut DataTable {
        let cells: Vec<Value> = cells.into_iter().map(|v| json!({ "v": v })).collect();
        self.rows.push(json!({ "c": cells }));
        self
    }

    /// Sets a table property (a string, as XProf writes them).
    pub fn property(&mut self, key: &str, value: impl Into<String>) -> &mut DataTable {
        self.properties.insert(key.to_string(), Value::String(value.into()));
        self
    }

    /// The JSON value; `p` is present only when a property was set.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("cols".into(), Value::Array(self.cols.clone()));
        if !self.properties.is_empty() {
            out.insert("p".into(), Value::Object(self.properties.clone()));
        }
        out.insert("rows".into(), Value::Array(self.rows.clone()));
        Value::Object(out)
    }
}
