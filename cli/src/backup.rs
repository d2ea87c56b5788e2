//! `tq backup`: a consistent copy of a queue file while it is in use.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use tq::rusqlite::{Connection, OpenFlags};
use tq::DEFAULT_QUEUE;

use crate::output::{print, print_json, CommandResult, Failure, Location, Outcome};

/// How long the copy waits for a lock held by a writer (a recovery, a
/// checkpoint) before giving up, as tq's own default busy timeout.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Arguments of `tq backup`.
#[derive(clap::Args)]
pub struct Args {
    /// The queue file to copy; `-`: $TQ_DATABASE_URL.
    #[arg(value_parser = Location::parse)]
    file: Location,

    /// The file to write the copy to, which must not exist.
    dest: PathBuf,
}

/// Runs `tq backup`: SQLite's `VACUUM INTO` copies what one read
/// transaction sees, so the copy holds every commit made before it began
/// and none half, while other processes go on pushing and working.
pub fn run(args: Args, json: bool) -> CommandResult {
    if args.file.is_postgres() {
        return Err(Failure::new(format!(
            "{}: tq backup copies SQLite queue files; back up a PostgreSQL database with pg_dump",
            args.file
        )));
    }
    let dest_shown = args.dest.display();
    if args.dest.symlink_metadata().is_ok() {
        return Err(Failure::new(format!(
            "{dest_shown}: already exists (tq backup writes a new file)"
        )));
    }
    let Some(dest) = args.dest.to_str() else {
        return Err(Failure::new(format!("{dest_shown}: the path is not UTF-8")));
    };
    // Opening through tq first gives the usual messages for a missing file
    // or one that is not a queue file.
    drop(args.file.open_existing(DEFAULT_QUEUE, |_| Ok(()))?);
    copy(args.file.file_path(), dest).map_err(|err| {
        // The file did not exist before: what is left of it is no copy.
        let _ = std::fs::remove_file(&args.dest);
        Failure::new(format!("{}: backing up to {dest_shown}: {err}", args.file))
    })?;
    let bytes = std::fs::metadata(&args.dest).map_or(0, |metadata| metadata.len());
    if json {
        print_json(&json!({ "file": args.file.to_string(), "backup": dest, "bytes": bytes }))?;
    } else {
        print(format!("backed up {} to {dest_shown}", args.file))?;
    }
    Ok(Outcome::Done)
}

/// Writes a copy of the database at `source` to the new file `dest` in WAL
/// mode and flushes it to the disk, with the directory entry that names it.
fn copy(source: &str, dest: &str) -> Result<(), String> {
    let connection = Connection::open_with_flags(source, OpenFlags::SQLITE_OPEN_READ_WRITE)
        .map_err(|err| err.to_string())?;
    connection
        .busy_timeout(BUSY_TIMEOUT)
        .map_err(|err| err.to_string())?;
    connection
        .execute("VACUUM INTO ?1", [dest])
        .map_err(|err| err.to_string())?;
    drop(connection);
    // The copy comes out in rollback-journal mode: put it in WAL mode, as
    // tq keeps its files, so that it can stand in for the original as is.
    Connection::open_with_flags(dest, OpenFlags::SQLITE_OPEN_READ_WRITE)
        .and_then(|copy| copy.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(())))
        .map_err(|err| err.to_string())?;
    let flush = |path: &Path| File::open(path).and_then(|file| file.sync_all());
    let dest = Path::new(dest);
    let directory = match dest.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    flush(dest)
        .and_then(|()| flush(directory))
        .map_err(|err: io::Error| format!("flushing the copy: {err}"))
}
