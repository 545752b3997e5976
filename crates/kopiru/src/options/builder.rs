//! [`CopyOptions`] built by chained setters from [`CopyOptions::new`],
//! and checked in one place ([`CopyOptions::check`]).

use super::*;

/// The builder: [`CopyOptions::new`] and chainable setters, for callers
/// who would rather not name every field. [`Default`] and the public
/// fields stay for those who do.
impl CopyOptions {
    /// The options of `kopiru copy SOURCE DEST` with no flags: the fastest
    /// method per file, holes kept, times and hard links kept, symlinks
    /// copied as links, everything durable when the copy returns, and the
    /// copies record of the command ([`crate::default_copies_record`]), so
    /// the same copy run again merges into the tree it made (as the command
    /// and the Node binding do) instead of nesting a second one inside.
    /// [`CopyOptions::default`] leaves the record out (cp's rule only).
    pub fn new() -> CopyOptions {
        CopyOptions {
            copies_record: crate::default_copies_record(),
            ..CopyOptions::default()
        }
    }

    /// Everything kept, as `cp -a`: mode, times, owner, extended
    /// attributes, hard links; symlinks never followed.
    pub fn archive(mut self) -> Self {
        self.preserve = Preserve::ALL;
        self.follow = Follow::Never;
        self
    }

    /// The metadata to keep.
    pub fn preserve(mut self, preserve: Preserve) -> Self {
        self.preserve = preserve;
        self
    }

    /// Whether symlinks are followed.
    pub fn follow(mut self, follow: Follow) -> Self {
        self.follow = follow;
        self
    }

    /// The data method.
    pub fn method(mut self, method: MethodChoice) -> Self {
        self.method = method;
        self
    }

    /// Adds an `--exclude` rule after those already there (rsync's
    /// patterns: [`crate::Filter`]; `+ ` in front makes it an include).
    ///
    /// # Errors
    /// The pattern is not a valid glob.
    pub fn exclude(mut self, pattern: &str) -> Result<Self, crate::PatternError> {
        let rule = crate::Rule::parse(crate::RuleKind::Exclude, pattern)?;
        self.filter.push(rule);
        Ok(self)
    }

    /// Adds an `--include` rule after those already there: the first rule
    /// that matches decides, so an include goes before the excludes it
    /// makes exceptions to.
    ///
    /// # Errors
    /// The pattern is not a valid glob.
    pub fn include(mut self, pattern: &str) -> Result<Self, crate::PatternError> {
        let rule = crate::Rule::parse(crate::RuleKind::Include, pattern)?;
        self.filter.push(rule);
        Ok(self)
    }

    /// Replaces the filter rules.
    pub fn filter(mut self, filter: crate::Filter) -> Self {
        self.filter = filter;
        self
    }

    /// Removes from the destination what the sources lack
    /// ([`CopyOptions::delete`]); needs [`CopyOptions::no_target_directory`]
    /// or sources ending in `/.`.
    pub fn delete(mut self, on: bool) -> Self {
        self.delete = on;
        self
    }

    /// Replaces a destination file only when the source is newer (`cp -u`).
    pub fn update(mut self, on: bool) -> Self {
        self.update = on;
        self
    }

    /// Writes nothing; the summary counts what would be done.
    pub fn dry_run(mut self, on: bool) -> Self {
        self.dry_run = on;
        self
    }

    /// `DEST` is the copy itself even if it is an existing directory (`-T`).
    pub fn no_target_directory(mut self, on: bool) -> Self {
        self.no_target_directory = on;
        self
    }

    /// Unchanged files are hard-linked from `dir` (rsync's `--link-dest`;
    /// a relative `dir` is relative to the destination).
    pub fn link_dest(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.basis = Some(Basis {
            dir: dir.into(),
            kind: BasisKind::Link,
        });
        self
    }

    /// Unchanged files are cloned from `dir` (`--clone-dest`).
    pub fn clone_dest(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.basis = Some(Basis {
            dir: dir.into(),
            kind: BasisKind::Clone,
        });
        self
    }

    /// Worker threads; 0 picks from the machine.
    pub fn jobs(mut self, jobs: usize) -> Self {
        self.jobs = jobs;
        self
    }

    /// When the copied data is made durable.
    pub fn sync(mut self, sync: SyncMode) -> Self {
        self.sync = sync;
        self
    }

    /// The handle that stops the copy (keep a clone to call
    /// [`crate::Cancel::cancel`] from elsewhere: a signal handler, a timer).
    pub fn cancel(mut self, cancel: crate::Cancel) -> Self {
        self.cancel = cancel;
        self
    }

    /// Finish an interrupted copy ([`CopyOptions::resume`]).
    pub fn resume(mut self, on: bool) -> Self {
        self.resume = on;
        self
    }
}

impl CopyOptions {
    /// Refuses settings that exclude each other, or do not work together
    /// yet: the one place that decides it. [`crate::copy`] calls it before
    /// anything else; a front end may call it first to report a usage
    /// error early. What depends on the sources and the destination (how
    /// many, what they are) is decided by the plan.
    ///
    /// # Errors
    /// [`crate::PlanError::Excludes`], [`crate::PlanError::NotWith`],
    /// [`crate::PlanError::NotOnThisPlatform`].
    pub fn check(&self) -> Result<(), crate::PlanError> {
        use crate::{PlanError, Setting};
        // Nothing is replaced, so there is nothing to back up.
        if self.no_clobber && self.backup.is_some() {
            return Err(PlanError::Excludes {
                first: Setting::NoClobber,
                second: Setting::Backup,
            });
        }
        // A clone is made whole or not at all: never a part to keep.
        if self.partial && self.method == MethodChoice::Clone {
            return Err(PlanError::Excludes {
                first: Setting::Partial,
                second: Setting::CloneMethod,
            });
        }
        let what = match (&self.shard, &self.files_from) {
            (Some(_), _) => Setting::Shard,
            (None, Some(_)) => Setting::FilesFrom,
            (None, None) => return Ok(()),
        };
        for (on, other) in [
            (self.dry_run, Setting::DryRun),
            (self.delete, Setting::Delete),
            (self.verify, Setting::Verify),
            (
                self.files_from.is_some() && self.shard.is_some(),
                Setting::FilesFrom,
            ),
        ] {
            if on {
                return Err(PlanError::NotWith { what, other });
            }
        }
        if self.shard.is_some() && crate::sys::available(crate::sys::Feature::Shard).is_err() {
            return Err(PlanError::NotOnThisPlatform { what });
        }
        Ok(())
    }
}
