//! The data directory and its lock.
//!
//! One process at a time owns a data directory: the server, or an admin command run while no
//! server is. The owner holds an exclusive lock on `<data_dir>/LOCK` for its lifetime; the lock
//! goes away with the process, however it ends.
//!
//! ```text
//! <data_dir>/LOCK         the lock
//! <data_dir>/log/         the FileLog
//! <data_dir>/state/       the projections' sled store
//! <data_dir>/admin.sock   the running server's admin socket (mode 0600)
//! <data_dir>/server.json  the running server's pid and bound addresses
//! ```

use std::{
    fs::{File, TryLockError},
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};

#[derive(Debug)]
pub struct DataDir {
    path: PathBuf,
    _lock: File,
}

impl DataDir {
    /// Takes the data directory, creating it if needed; `None` while another process has it.
    pub fn try_acquire(path: &Path) -> Result<Option<DataDir>> {
        std::fs::create_dir_all(path)
            .with_context(|| format!("cannot create data directory {}", path.display()))?;
        let lock_path = path.join("LOCK");
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .with_context(|| format!("cannot open {}", lock_path.display()))?;
        match lock.try_lock() {
            Ok(()) => Ok(Some(DataDir {
                path: path.to_owned(),
                _lock: lock,
            })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(error)) => {
                Err(error).with_context(|| format!("cannot lock {}", lock_path.display()))
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn admin_socket(data_dir: &Path) -> PathBuf {
        data_dir.join("admin.sock")
    }

    pub fn server_file(data_dir: &Path) -> PathBuf {
        data_dir.join("server.json")
    }
}
