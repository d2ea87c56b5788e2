//! Worker processes for the benchmarks: this binary run again, once per
//! spec, with the spec in an environment variable that tells `main` which
//! role to play. Shared by `throughput.rs` (through `concurrency.rs`) and
//! `postgres.rs`.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// What a child prints once it is ready to start.
const READY: &str = "ready\n";

/// Starts one child per spec, each with `role` set to its spec, lets them
/// all go at once when every one has said it is ready ([`wait_for_start`]),
/// and returns what each printed after that, in order, once all have
/// exited; fails if any child failed.
pub fn run(role: &str, specs: &[String]) -> Result<Vec<String>> {
    let mut children = Vec::new();
    for spec in specs {
        let child = Command::new(std::env::current_exe()?)
            .env(role, spec)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn();
        match child {
            Ok(child) => children.push(child),
            Err(err) => {
                stop(children);
                return Err(err.into());
            }
        }
    }
    let mut outputs = Vec::new();
    for child in &mut children {
        let mut output = BufReader::new(child.stdout.take().ok_or("no pipe")?);
        let mut line = String::new();
        if output.read_line(&mut line).is_err() || line != READY {
            // One that failed while opening its queue: the others, waiting
            // for the start, would wait for ever.
            stop(children);
            return Err("a child process failed before it was ready".into());
        }
        outputs.push(output);
    }
    // Closing their standard input is the start.
    for child in &mut children {
        drop(child.stdin.take());
    }
    let mut texts = Vec::new();
    for (mut child, mut output) in children.into_iter().zip(outputs) {
        let mut text = String::new();
        output.read_to_string(&mut text)?;
        if !child.wait()?.success() {
            return Err("a child process failed".into());
        }
        texts.push(text);
    }
    Ok(texts)
}

/// The child's side: says it is ready, then waits until every child has.
pub fn wait_for_start() -> Result<()> {
    let mut stdout = std::io::stdout();
    stdout.write_all(READY.as_bytes())?;
    stdout.flush()?;
    // Nothing comes on standard input: its end is the start.
    std::io::stdin().read_to_end(&mut Vec::new())?;
    Ok(())
}

/// Ends children that will not be waited for.
fn stop(children: Vec<Child>) {
    for mut child in children {
        let _ = child.kill();
        let _ = child.wait();
    }
}
