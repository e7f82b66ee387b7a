//! Splitting a suite over CI jobs: `--shard i/n` gives job i of n its
//! part, the same part on every machine, so n jobs together run every
//! scenario exactly once.

use std::{fmt, str::FromStr};

/// One part of a suite split into `count` parts (`index` counts from 1,
/// as CI matrices do).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

/// A `--shard` value that is not `i/n` with 1 <= i <= n.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("--shard '{given}' {why}; it looks like 2/3 (job 2 of 3, counting from 1)")]
pub struct ShardError {
    pub given: String,
    pub why: &'static str,
}

impl FromStr for Shard {
    type Err = ShardError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |why| ShardError {
            given: s.to_string(),
            why,
        };
        let (i, n) = s.split_once('/').ok_or_else(|| err("has no '/'"))?;
        let index: usize = i
            .trim()
            .parse()
            .map_err(|_| err("has no job number before '/'"))?;
        let count: usize = n
            .trim()
            .parse()
            .map_err(|_| err("has no job count after '/'"))?;
        if count == 0 {
            return Err(err("splits into 0 jobs"));
        }
        if index == 0 || index > count {
            return Err(err("names a job outside 1..=n"));
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// This shard's items: every `count`-th one from position `index - 1`
    /// in the given order (scenarios load in file-name order). Dealing
    /// round-robin keeps neighbours (variants of one case, which tend to
    /// cost alike) in different jobs.
    pub fn select<T>(&self, items: Vec<T>) -> Vec<T> {
        items
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % self.count == self.index - 1)
            .map(|(_, t)| t)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_job_of_count() {
        assert_eq!("2/3".parse(), Ok(Shard { index: 2, count: 3 }));
        assert_eq!("1/1".parse::<Shard>().unwrap().to_string(), "1/1");
    }

    #[test]
    fn rejects_what_is_not_a_job_of_a_count() {
        for (given, why) in [
            ("3", "has no '/'"),
            ("0/3", "names a job outside 1..=n"),
            ("4/3", "names a job outside 1..=n"),
            ("1/0", "splits into 0 jobs"),
            ("a/3", "has no job number before '/'"),
            ("1/", "has no job count after '/'"),
        ] {
            let e = given.parse::<Shard>().unwrap_err();
            assert_eq!(e.why, why, "{given}");
            assert!(e.to_string().contains("looks like 2/3"), "{e}");
        }
    }

    #[test]
    fn the_shards_partition_the_suite() {
        let suite: Vec<usize> = (0..14).collect();
        for count in 1..=16 {
            let mut seen: Vec<usize> = (1..=count)
                .flat_map(|index| Shard { index, count }.select(suite.clone()))
                .collect();
            seen.sort();
            assert_eq!(seen, suite, "{count} shards must cover each item once");
            // Balanced: sizes differ by at most one.
            let sizes: Vec<usize> = (1..=count)
                .map(|index| Shard { index, count }.select(suite.clone()).len())
                .collect();
            let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            assert!(max - min <= 1, "{count}: {sizes:?}");
        }
    }

    #[test]
    fn the_same_shard_gets_the_same_items() {
        let s: Shard = "2/3".parse().unwrap();
        assert_eq!(s.select(vec!['a', 'b', 'c', 'd', 'e']), vec!['b', 'e']);
    }
}
