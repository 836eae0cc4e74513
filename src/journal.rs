//! A durable local journal of records keyed by a string: JSON lines, append-only
//! (`{"put": {...}}` / `{"done": "<key>"}`), each append fsync'd, compacted on open by an
//! atomic rewrite (temp file, fsync, rename, fsync of the directory). The result outbox
//! ([`crate::outbox`]) and the notification outbox ([`crate::notifications::journal`]) are
//! journals; what a record means, and who may open the file, is theirs.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// One line of a journal.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Entry<T> {
    Put(Box<T>),
    Done(String),
}

/// A journal file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct JournalError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// An open journal: its records in memory, the file to append to.
#[derive(Debug)]
pub struct Journal<T> {
    path: PathBuf,
    file: File,
    records: BTreeMap<String, T>,
    key: fn(&T) -> String,
}

/// The records a journal file holds, read without changing it (none when there is no file;
/// unreadable lines are skipped, as [`Journal::open`] skips them).
pub fn read<T: DeserializeOwned>(path: &Path, key: fn(&T) -> String) -> Vec<T> {
    let Ok(text) = fs::read_to_string(path) else {
        return Vec::new();
    };
    let mut records = BTreeMap::new();
    for line in text.lines() {
        let _ = replay(&mut records, line, key);
    }
    records.into_values().collect()
}

/// Applies one line to the records (blank lines are nothing).
fn replay<T: DeserializeOwned>(
    records: &mut BTreeMap<String, T>,
    line: &str,
    key: fn(&T) -> String,
) -> Result<(), serde_json::Error> {
    if line.trim().is_empty() {
        return Ok(());
    }
    match serde_json::from_str::<Entry<T>>(line)? {
        Entry::Put(record) => {
            records.insert(key(&record), *record);
        }
        Entry::Done(k) => {
            records.remove(&k);
        }
    }
    Ok(())
}

impl<T: Serialize + DeserializeOwned> Journal<T> {
    /// Opens (creating if needed) the journal at `path`, replays it, and compacts it,
    /// keeping the records `keep` says to.
    pub fn open(
        path: &Path,
        key: fn(&T) -> String,
        keep: impl Fn(&T) -> bool,
    ) -> Result<Self, JournalError> {
        let io = |p: &Path| {
            let path = p.to_path_buf();
            move |source| JournalError {
                path: path.clone(),
                source,
            }
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut records = BTreeMap::new();
        if path.exists() {
            let reader = BufReader::new(File::open(path).map_err(io(path))?);
            for (n, line) in reader.lines().enumerate() {
                let line = line.map_err(io(path))?;
                // A torn last line from a crash mid-append: the record it held was never
                // acknowledged as stored, so nothing is lost by skipping it.
                if let Err(e) = replay(&mut records, &line, key) {
                    tracing::warn!(
                        journal = %path.display(),
                        line = n + 1,
                        error = %e,
                        "skipping an unreadable journal line"
                    );
                }
            }
        }
        records.retain(|_, r| keep(r));
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        {
            let mut f = File::create(&tmp).map_err(io(&tmp))?;
            for record in records.values() {
                let line = serde_json::to_string(&Entry::Put(Box::new(record)))
                    .map_err(|e| io(&tmp)(e.into()))?;
                writeln!(f, "{line}").map_err(io(&tmp))?;
            }
            f.sync_all().map_err(io(&tmp))?;
        }
        fs::rename(&tmp, path).map_err(io(path))?;
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io(dir))?;
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(io(path))?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            records,
            key,
        })
    }

    /// Stores `record` durably (fsync), in place of any with its key.
    pub fn put(&mut self, record: T) -> Result<(), JournalError> {
        self.append(&Entry::Put(Box::new(&record)))?;
        self.records.insert((self.key)(&record), record);
        Ok(())
    }

    /// Forgets the record of `key` durably; nothing when there is none.
    pub fn done(&mut self, key: &str) -> Result<(), JournalError> {
        if self.records.contains_key(key) {
            self.append(&Entry::<T>::Done(key.to_string()))?;
            self.records.remove(key);
        }
        Ok(())
    }

    pub fn get(&self, key: &str) -> Option<&T> {
        self.records.get(key)
    }

    pub fn records(&self) -> impl Iterator<Item = &T> {
        self.records.values()
    }

    pub fn contains(&self, key: &str) -> bool {
        self.records.contains_key(key)
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn append<R: Serialize>(&mut self, entry: &Entry<R>) -> Result<(), JournalError> {
        let err = |source| JournalError {
            path: self.path.clone(),
            source,
        };
        let mut line = serde_json::to_string(entry).map_err(|e| err(e.into()))?;
        line.push('\n');
        self.file.write_all(line.as_bytes()).map_err(err)?;
        self.file.sync_data().map_err(err)
    }
}
