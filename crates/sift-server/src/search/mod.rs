//! RediSearch-style search indexes over the keyspace. An index (`FT.CREATE`) is a definition
//! kept in the collection `redis.search` plus one Sift index per schema field in the collection
//! `redis.keys`, named `ft.ID.N`, restricted to the definition's key prefixes and reading the
//! field as the definition's type (`definition.rs`). Creating one back-fills in a background
//! thread; until every field's index is ready, queries scan the prefixes instead, so answers are
//! exact throughout (`execute.rs`). A restart resumes an unfinished build.

pub mod definition;
pub mod execute;
pub mod geo;
pub mod query;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Mutex, RwLock};
use sift_index::{AttrPath, IndexError, IndexKind, IndexState, Maintenance, MAX_PRIMARY_KEY_BYTES};

use crate::keyspace::{Keyspace, KeyspaceError, KEYS_COLLECTION};
use definition::{Definition, FieldType, SEARCH_COLLECTION, SEARCH_NAME_FIELD};

/// Where an index's build is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildState {
    /// Fields are being back-filled.
    Indexing,
    /// Every field's index is ready.
    Ready,
    /// A field's index could not be created (the reason); queries scan.
    Failed(String),
}

/// Progress of a build, for FT.INFO.
#[derive(Debug, Clone)]
pub struct Progress {
    /// The state.
    pub state: BuildState,
    /// Fields whose index is ready.
    pub fields_ready: usize,
    /// Documents read by the back-fill of the field being built.
    pub documents_done: u64,
    /// Keys in the database when that back-fill started.
    pub documents_total: u64,
}

impl Progress {
    /// FT.INFO's `percent_indexed`, 0 to 1.
    pub fn fraction(&self, fields: usize) -> f64 {
        if self.state == BuildState::Ready || fields == 0 {
            return 1.0;
        }
        let current = if self.documents_total == 0 {
            0.0
        } else {
            (self.documents_done as f64 / self.documents_total as f64).min(1.0)
        };
        ((self.fields_ready as f64 + current) / fields as f64).min(1.0)
    }
}

/// One search index.
#[derive(Debug)]
pub struct SearchIndex {
    /// What FT.CREATE declared.
    pub definition: Definition,
    progress: Mutex<Progress>,
    dropped: AtomicBool,
    /// FT.SEARCH calls (FT.INFO's `number_of_uses`).
    pub uses: AtomicU64,
}

impl SearchIndex {
    fn new(definition: Definition) -> SearchIndex {
        SearchIndex {
            definition,
            progress: Mutex::new(Progress {
                state: BuildState::Indexing,
                fields_ready: 0,
                documents_done: 0,
                documents_total: 0,
            }),
            dropped: AtomicBool::new(false),
            uses: AtomicU64::new(0),
        }
    }

    /// Its build progress.
    pub fn progress(&self) -> Progress {
        self.progress.lock().clone()
    }

    /// Whether queries may use the fields' Sift indexes.
    pub fn is_ready(&self) -> bool {
        self.progress.lock().state == BuildState::Ready
    }
}

/// Why FT.CREATE or FT.DROPINDEX failed: the reply's text.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// A user error, answered as `ERR …`-less RediSearch text.
    #[error("{0}")]
    Refused(String),
    /// Storage failed.
    #[error(transparent)]
    Keyspace(#[from] KeyspaceError),
}

impl From<IndexError> for SearchError {
    fn from(error: IndexError) -> SearchError {
        SearchError::Keyspace(KeyspaceError::Database(error))
    }
}

/// Every search index of the database.
#[derive(Debug, Default)]
pub struct SearchIndexes {
    indexes: RwLock<BTreeMap<String, Arc<SearchIndex>>>,
    /// Serialises FT.CREATE and FT.DROPINDEX.
    ddl: Mutex<()>,
    next_id: AtomicU64,
    builders: Mutex<Vec<JoinHandle<()>>>,
    stopping: Arc<AtomicBool>,
    /// Builds running now.
    building: Arc<AtomicUsize>,
}

impl SearchIndexes {
    /// Loads the definitions, drops Sift indexes no definition names (a crash between the
    /// two writes of FT.CREATE or FT.DROPINDEX), and resumes unfinished builds.
    pub fn open(keyspace: &Arc<Keyspace>) -> Result<SearchIndexes, SearchError> {
        let database = keyspace.database();
        if database.collection(SEARCH_COLLECTION).is_err() {
            database.create_collection(SEARCH_COLLECTION, SEARCH_NAME_FIELD)?;
        }
        let registry = SearchIndexes::default();
        let mut from = Vec::new();
        let mut max_id = 0;
        loop {
            let page = database.scan(SEARCH_COLLECTION, &from, 1000)?;
            let Some(last) = page.last() else { break };
            from.clone_from(&last.pk);
            from.push(0);
            for hit in page {
                let definition =
                    definition::decode(&hit.doc).map_err(|reason| KeyspaceError::Damaged {
                        key: format!("search index {}", String::from_utf8_lossy(&hit.pk)),
                        reason,
                    })?;
                max_id = max_id.max(definition.id);
                registry.indexes.write().insert(
                    definition.name.clone(),
                    Arc::new(SearchIndex::new(definition)),
                );
            }
        }
        let existing = database.collection(KEYS_COLLECTION)?.indexes;
        for record in &existing {
            if let Some(id) = sift_index_id(&record.name) {
                max_id = max_id.max(id);
                let named = registry.indexes.read().values().any(|index| {
                    index
                        .definition
                        .fields
                        .iter()
                        .any(|field| field.sift_index == record.name)
                });
                if !named {
                    tracing::info!(index = %record.name, "dropping a search field index no definition names");
                    database.drop_index(KEYS_COLLECTION, &record.name)?;
                }
            }
        }
        registry.next_id.store(max_id + 1, Ordering::Relaxed);
        let indexes: Vec<Arc<SearchIndex>> = registry.indexes.read().values().cloned().collect();
        for index in indexes {
            registry.start_build(keyspace, index);
        }
        Ok(registry)
    }

    /// The index named `name`.
    pub fn get(&self, name: &str) -> Option<Arc<SearchIndex>> {
        self.indexes.read().get(name).cloned()
    }

    /// Every index, by name.
    pub fn all(&self) -> Vec<Arc<SearchIndex>> {
        self.indexes.read().values().cloned().collect()
    }

    /// Records a new index and starts its build. `definition.id` and the fields' Sift index
    /// names are assigned here.
    pub fn create(
        &self,
        keyspace: &Arc<Keyspace>,
        mut definition: Definition,
    ) -> Result<(), SearchError> {
        let _ddl = self.ddl.lock();
        if self.indexes.read().contains_key(&definition.name) {
            return Err(SearchError::Refused("Index already exists".to_owned()));
        }
        if definition.name.is_empty() || definition.name.len() > MAX_PRIMARY_KEY_BYTES {
            return Err(SearchError::Refused(format!(
                "an index name must be 1 to {MAX_PRIMARY_KEY_BYTES} bytes"
            )));
        }
        for field in &definition.fields {
            // Checked now: a definition whose field index cannot be created would be stored
            // and fail at every build.
            AttrPath::from_segments(&field.segments).map_err(|error| {
                SearchError::Refused(format!("Invalid field '{}': {error}", field.identifier))
            })?;
        }
        definition.id = self.next_id.fetch_add(1, Ordering::Relaxed);
        for (position, field) in definition.fields.iter_mut().enumerate() {
            field.sift_index = format!("ft.{}.{position}", definition.id);
        }
        for position in 0..definition.fields.len() {
            let spec = definition.index_spec(position);
            let field = &definition.fields[position];
            let maintenance = spec.checked_maintenance().map_err(|reason| {
                SearchError::Refused(format!("field '{}': {reason}", field.alias))
            })?;
            let kind = field.kind;
            if field.search_type == FieldType::Geo
                && !matches!(
                    kind,
                    IndexKind::Composite
                        | IndexKind::Memory
                        | IndexKind::Next
                        | IndexKind::SstLocal
                )
            {
                return Err(SearchError::Refused(format!(
                    "field '{}': a {kind} index cannot answer geo queries (use composite, memory, \
                     next or sst-local)",
                    field.alias
                )));
            }
            if field.search_type == FieldType::Geo && maintenance == Maintenance::Deferred {
                return Err(SearchError::Refused(format!(
                    "field '{}': geo queries do not read deferred composite indexes yet (use \
                     sync-full or sync-insert)",
                    field.alias
                )));
            }
            definition.fields[position].maintenance = maintenance;
        }
        keyspace
            .database()
            .put(SEARCH_COLLECTION, &definition::encode(&definition))?;
        let index = Arc::new(SearchIndex::new(definition));
        self.indexes
            .write()
            .insert(index.definition.name.clone(), Arc::clone(&index));
        self.start_build(keyspace, index);
        Ok(())
    }

    /// Removes an index: its definition, then its fields' Sift indexes. A build still running
    /// drops the field it is creating when it finishes it.
    pub fn drop_index(
        &self,
        keyspace: &Keyspace,
        name: &str,
    ) -> Result<Arc<SearchIndex>, SearchError> {
        let _ddl = self.ddl.lock();
        let Some(index) = self.get(name) else {
            return Err(SearchError::Refused("Unknown Index name".to_owned()));
        };
        index.dropped.store(true, Ordering::Release);
        let database = keyspace.database();
        database.delete(SEARCH_COLLECTION, name.as_bytes())?;
        self.indexes.write().remove(name);
        for field in &index.definition.fields {
            match database.drop_index(KEYS_COLLECTION, &field.sift_index) {
                Ok(()) | Err(IndexError::UnknownIndex { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(index)
    }

    /// Whether a build is running (writes may wait for a back-fill).
    pub fn is_building(&self) -> bool {
        self.building.load(Ordering::Relaxed) > 0
    }

    /// Stops the builds between two fields and waits for them (a field being back-filled is
    /// finished first). The next open resumes them.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        let builders: Vec<JoinHandle<()>> = self.builders.lock().drain(..).collect();
        for builder in builders {
            let _ = builder.join();
        }
    }

    fn start_build(&self, keyspace: &Arc<Keyspace>, index: Arc<SearchIndex>) {
        let keyspace = Arc::clone(keyspace);
        let stopping = Arc::clone(&self.stopping);
        let building = Arc::clone(&self.building);
        let name = index.definition.name.clone();
        building.fetch_add(1, Ordering::Relaxed);
        let running = Arc::clone(&building);
        let spawned = std::thread::Builder::new()
            .name(format!("sift-ft-build-{}", index.definition.id))
            .spawn(move || {
                build(&keyspace, &index, &stopping);
                running.fetch_sub(1, Ordering::Relaxed);
            });
        match spawned {
            Ok(handle) => {
                let mut builders = self.builders.lock();
                builders.retain(|builder| !builder.is_finished());
                builders.push(handle);
            }
            Err(error) => {
                building.fetch_sub(1, Ordering::Relaxed);
                tracing::error!(index = %name, %error, "could not start the index build thread");
            }
        }
    }
}

/// The id of a search field's Sift index name (`ft.ID.N`).
fn sift_index_id(name: &str) -> Option<u64> {
    let rest = name.strip_prefix("ft.")?;
    let (id, position) = rest.split_once('.')?;
    position.parse::<usize>().ok()?;
    id.parse().ok()
}

/// Creates each field's Sift index that does not exist yet, in order.
fn build(keyspace: &Keyspace, index: &SearchIndex, stopping: &AtomicBool) {
    let database = keyspace.database();
    let definition = &index.definition;
    for position in 0..definition.fields.len() {
        if stopping.load(Ordering::Acquire) || index.dropped.load(Ordering::Acquire) {
            return;
        }
        let name = &definition.fields[position].sift_index;
        let exists = database.collection(KEYS_COLLECTION).is_ok_and(|info| {
            info.indexes
                .iter()
                .any(|record| &record.name == name && record.state == IndexState::Ready)
        });
        if !exists {
            {
                let mut progress = index.progress.lock();
                progress.documents_done = 0;
                progress.documents_total = keyspace.len();
            }
            let created = database.create_index_with_progress(
                KEYS_COLLECTION,
                definition.index_spec(position),
                &mut |report| index.progress.lock().documents_done = report.documents_done,
            );
            if let Err(error) = created {
                tracing::error!(index = %definition.name, field = %definition.fields[position].alias, %error, "building a search field index failed");
                index.progress.lock().state = BuildState::Failed(error.to_string());
                return;
            }
            if index.dropped.load(Ordering::Acquire) {
                // FT.DROPINDEX ran while this field was being created.
                let _ = database.drop_index(KEYS_COLLECTION, name);
                return;
            }
        }
        let mut progress = index.progress.lock();
        progress.fields_ready = position + 1;
        progress.documents_done = 0;
    }
    index.progress.lock().state = BuildState::Ready;
    tracing::info!(index = %definition.name, "search index ready");
}
