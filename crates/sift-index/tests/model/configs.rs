//! The configurations under test: every index kind × maintenance scheme (with the options that
//! change how a kind answers), each indexed on every attribute type it supports.

use sift_index::{AttrType, IndexKind, IndexSpec, Maintenance, SplitDelta, Validation};

/// The collection whose writes read the old version (some of its indexes need it).
pub const DOCS: &str = "docs";
/// The collection with only `deferred` indexes: its writes and deletes are blind.
pub const BLIND: &str = "blind";
/// Both collections, in the order the model keeps their sequence numbers.
pub const COLLECTIONS: [&str; 2] = [DOCS, BLIND];

/// One attribute of the test documents: its JSON field (also the index name's suffix) and type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attribute {
    pub field: &'static str,
    pub attr_type: AttrType,
}

pub const ATTRIBUTES: [Attribute; 5] = [
    Attribute {
        field: "n",
        attr_type: AttrType::Int,
    },
    Attribute {
        field: "f",
        attr_type: AttrType::Float,
    },
    Attribute {
        field: "s",
        attr_type: AttrType::String,
    },
    Attribute {
        field: "t",
        attr_type: AttrType::Time,
    },
    Attribute {
        field: "g",
        attr_type: AttrType::Geo,
    },
];

/// The attributes indexed again on existing data ("late" indexes, dropped and rebuilt).
pub const LATE_FIELDS: [&str; 3] = ["n", "s", "g"];

/// One kind × maintenance configuration.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub name: &'static str,
    pub kind: IndexKind,
    pub maintenance: Maintenance,
    pub read_repair: bool,
    /// `next` / `sst-local`: validation strategy and value-aware block cut (δ).
    pub validation: Option<Validation>,
    pub split_delta: Option<f64>,
    /// `embedded`: bloom filter bits per key (tiny, so false positives are common).
    pub bloom_bits_per_key: Option<u32>,
}

const fn config(name: &'static str, kind: IndexKind, maintenance: Maintenance) -> Config {
    Config {
        name,
        kind,
        maintenance,
        read_repair: false,
        validation: None,
        split_delta: None,
        bloom_bits_per_key: None,
    }
}

const fn repairing(config: Config) -> Config {
    Config {
        read_repair: true,
        ..config
    }
}

const fn validated(config: Config, validation: Validation, split_delta: Option<f64>) -> Config {
    Config {
        validation: Some(validation),
        split_delta,
        ..config
    }
}

/// Every configuration. Adding a kind or a scheme means adding it here; the driver, the
/// metamorphic check and the crash test pick it up.
pub const CONFIGS: [Config; 16] = [
    config(
        "composite_insert",
        IndexKind::Composite,
        Maintenance::SyncInsert,
    ),
    repairing(config(
        "composite_repair",
        IndexKind::Composite,
        Maintenance::SyncInsert,
    )),
    config(
        "composite_full",
        IndexKind::Composite,
        Maintenance::SyncFull,
    ),
    config(
        "composite_async",
        IndexKind::Composite,
        Maintenance::AsyncSimple,
    ),
    config(
        "composite_session",
        IndexKind::Composite,
        Maintenance::AsyncSession,
    ),
    config(
        "composite_deferred",
        IndexKind::Composite,
        Maintenance::Deferred,
    ),
    config("eager", IndexKind::Eager, Maintenance::SyncFull),
    config("lazy_insert", IndexKind::Lazy, Maintenance::SyncInsert),
    config("lazy_full", IndexKind::Lazy, Maintenance::SyncFull),
    repairing(config(
        "lazy_repair",
        IndexKind::Lazy,
        Maintenance::SyncInsert,
    )),
    config("memory", IndexKind::Memory, Maintenance::SyncFull),
    Config {
        bloom_bits_per_key: Some(2),
        ..config("embedded", IndexKind::Embedded, Maintenance::SyncInsert)
    },
    validated(
        config(
            "sst_local_memo_delta",
            IndexKind::SstLocal,
            Maintenance::SyncInsert,
        ),
        Validation::Memo,
        Some(1.0),
    ),
    validated(
        config(
            "sst_local_lite",
            IndexKind::SstLocal,
            Maintenance::SyncInsert,
        ),
        Validation::GetLite,
        None,
    ),
    validated(
        config("next_memo", IndexKind::Next, Maintenance::SyncInsert),
        Validation::Memo,
        None,
    ),
    validated(
        config("next_lite_delta", IndexKind::Next, Maintenance::SyncInsert),
        Validation::GetLite,
        Some(2.0),
    ),
];

impl Config {
    /// The collection this configuration's indexes live in.
    pub fn collection(&self) -> &'static str {
        if self.maintenance == Maintenance::Deferred {
            BLIND
        } else {
            DOCS
        }
    }

    /// The position of [`Config::collection`] in [`COLLECTIONS`].
    pub fn collection_slot(&self) -> usize {
        usize::from(self.collection() == BLIND)
    }

    /// Whether this configuration answers queries on `attr_type` (geo: `within`).
    pub fn supports(&self, attr_type: AttrType) -> bool {
        attr_type != AttrType::Geo
            || (matches!(
                self.kind,
                IndexKind::Composite | IndexKind::Memory | IndexKind::SstLocal | IndexKind::Next
            ) && self.maintenance != Maintenance::Deferred)
    }

    pub fn is_async(&self) -> bool {
        self.maintenance.is_async()
    }

    /// The index name for `field` under `prefix` ("" or "late_").
    pub fn index_name(&self, prefix: &str, field: &str) -> String {
        format!("{prefix}{}_{field}", self.name)
    }

    pub fn spec(&self, name: &str, attribute: Attribute) -> IndexSpec {
        let mut spec = IndexSpec::new(name, attribute.field, attribute.attr_type, self.kind)
            .with_maintenance(self.maintenance)
            .with_read_repair(self.read_repair);
        if let Some(validation) = self.validation {
            spec = spec.with_validation(validation);
        }
        if let Some(delta) = self.split_delta {
            // Geo deltas are degrees; a block cut at a gap of `delta` in either axis.
            spec = spec.with_split_delta(SplitDelta::new(delta).expect("a positive delta"));
        }
        if let Some(bits) = self.bloom_bits_per_key {
            spec = spec.with_bloom_bits_per_key(bits);
        }
        spec
    }
}

/// Every (configuration, attribute) pair the driver indexes and queries.
pub fn indexed() -> impl Iterator<Item = (Config, Attribute)> {
    CONFIGS.into_iter().flat_map(|config| {
        ATTRIBUTES
            .into_iter()
            .filter(move |attribute| config.supports(attribute.attr_type))
            .map(move |attribute| (config, attribute))
    })
}
