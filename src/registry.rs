//! The objects a process shares between the handles that want the same
//! one (an SQLite file's connections, a PostgreSQL schema's listener, a
//! queue's bell), found by key.
//!
//! A registry holds them weakly: an object lives as long as a handle uses
//! it, and its entry is forgotten once it is dropped. It is a B-tree rather
//! than a hash table, so that leak checkers see its nodes as reachable at
//! exit, and so that entries with a common key prefix are found together.
//! Its lock is taken through [`global_lock::lock`], so that a child forked
//! while another thread held it gets an error, not a hang.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::error::Result;
use crate::global_lock;

pub(crate) struct Registry<K, V>(Mutex<BTreeMap<K, Weak<V>>>);

impl<K: Ord, V> Registry<K, V> {
    pub(crate) const fn new() -> Self {
        Registry(Mutex::new(BTreeMap::new()))
    }

    /// The live object registered under `key`, if any.
    pub(crate) fn find(&self, key: &K) -> Result<Option<Arc<V>>> {
        let mut entries = self.entries()?;
        entries.retain(|_, object| object.strong_count() > 0);
        Ok(entries.get(key).and_then(Weak::upgrade))
    }

    /// Registers `made` under `key` and returns it, unless another thread
    /// registered a live object there first (making one can take long, and
    /// is done without the lock): then that one is returned, and `made` is
    /// dropped once the lock is released.
    pub(crate) fn adopt(&self, key: K, made: Arc<V>) -> Result<Arc<V>> {
        let existing = {
            let mut entries = self.entries()?;
            let existing = entries.get(&key).and_then(Weak::upgrade);
            if existing.is_none() {
                entries.insert(key, Arc::downgrade(&made));
            }
            existing
        };
        Ok(existing.unwrap_or(made))
    }

    /// Every entry, live or not, under the registry's lock.
    pub(crate) fn entries(&self) -> Result<MutexGuard<'_, BTreeMap<K, Weak<V>>>> {
        global_lock::lock(&self.0)
    }
}
