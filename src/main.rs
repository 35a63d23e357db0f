//! The `tidegate` binary: parses the command line and hands over to `tidegate::cli`.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    tidegate::cli::run(tidegate::cli::Cli::parse())
}
