//! What every object made from one `open` shares: the open database (or nothing, once
//! closed) and, for session-bound collections, the session.
//!
//! Every engine call runs without the GIL, under a read lock of the database slot; `close`
//! takes the write lock, so it waits for calls in flight and every later call raises
//! `DatabaseClosed`. No lock here is ever waited for with the GIL held while its holder needs
//! the GIL.

use crate::errors::{to_python, DatabaseClosed, SessionExpired};
use parking_lot::{Mutex, RwLock};
use pyo3::prelude::*;
use sift_index::{Database as Engine, Session as EngineSession, SessionHandle};

/// The open database behind a `Database` and every collection and session made from it.
pub struct Shared {
    database: RwLock<Option<Engine>>,
    path: String,
}

impl Shared {
    /// `database`, opened from the directory `path`.
    pub fn new(database: Engine, path: String) -> Shared {
        Shared {
            database: RwLock::new(Some(database)),
            path,
        }
    }

    /// Closes the database once calls in flight have finished; a second close waits for the
    /// first (the directory is free once either returns).
    pub fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| {
            let mut slot = self.database.write();
            match slot.take() {
                Some(database) => database.close(),
                None => Ok(()),
            }
        })
        .map_err(|error| to_python(&error))
    }

    /// Whether the database was closed. Without the GIL: a close waiting for a long call
    /// holds new readers back.
    pub fn is_closed(&self, py: Python<'_>) -> bool {
        py.detach(|| self.database.read().is_none())
    }

    /// Runs `work` on the open database, with the GIL released.
    pub fn run<T: Send>(
        &self,
        py: Python<'_>,
        work: impl FnOnce(&Engine) -> sift_index::Result<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let guard = self.database.read();
            let database = guard.as_ref().ok_or_else(|| self.closed())?;
            work(database).map_err(|error| to_python(&error))
        })
    }

    /// Runs `work` through the session `slot` holds, with the GIL released.
    pub fn run_in_session<T: Send>(
        &self,
        py: Python<'_>,
        slot: &SessionSlot,
        work: impl FnOnce(&EngineSession<'_>) -> sift_index::Result<T> + Send,
    ) -> PyResult<T> {
        let handle = slot.handle()?;
        self.run(py, move |database| {
            let session = database.attach_session(&handle)?;
            work(&session)
        })
    }

    fn closed(&self) -> PyErr {
        DatabaseClosed::new_err(format!("database {} is closed", self.path))
    }

    /// The database's directory, as given to `open`.
    pub fn path(&self) -> &str {
        &self.path
    }
}

/// The session a session-bound collection writes and reads through; empty once ended.
pub struct SessionSlot {
    handle: Mutex<Option<SessionHandle>>,
}

impl SessionSlot {
    /// A slot holding `handle`.
    pub fn new(handle: SessionHandle) -> SessionSlot {
        SessionSlot {
            handle: Mutex::new(Some(handle)),
        }
    }

    /// Ends the session: its overlay goes once no call uses it.
    pub fn end(&self) {
        self.handle.lock().take();
    }

    /// The session's handle, or `SessionExpired` once it was ended.
    pub fn handle(&self) -> PyResult<SessionHandle> {
        self.handle
            .lock()
            .clone()
            .ok_or_else(|| SessionExpired::new_err("the session was ended; start a new one"))
    }
}
