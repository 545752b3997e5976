//! Printing that never panics: a closed stdout (`kopiru ... | head -c1`)
//! or stderr ends the output quietly, and the exit code stays the
//! command's. (`println!` panics on EPIPE; Rust ignores SIGPIPE, so a write
//! to a closed pipe is an EPIPE error, not a signal.)

/// `println!` with write errors ignored.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// `print!` with write errors ignored.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// `eprintln!` with write errors ignored.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}
