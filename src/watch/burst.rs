//! The guard against poisoning and slips of the mouse: at most so many lessons per user
//! within a sliding window. What goes past it is logged, for a person to learn by hand.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

pub struct BurstLimit {
    limit: usize,
    window: Duration,
    recent: HashMap<String, VecDeque<Instant>>,
}

impl BurstLimit {
    /// `limit` 0 means no limit.
    pub fn new(limit: usize, window: Duration) -> BurstLimit {
        BurstLimit {
            limit,
            window,
            recent: HashMap::new(),
        }
    }

    /// Whether `user` may learn one more message at `now`; counts it if so.
    pub fn admit(&mut self, user: &str, now: Instant) -> bool {
        if self.limit == 0 {
            return true;
        }
        let recent = self.recent.entry(user.to_string()).or_default();
        while recent
            .front()
            .is_some_and(|&t| now.duration_since(t) >= self.window)
        {
            recent.pop_front();
        }
        if recent.len() >= self.limit {
            return false;
        }
        recent.push_back(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_each_user_within_the_window() {
        let mut b = BurstLimit::new(2, Duration::from_secs(10));
        let t = Instant::now();
        assert!(b.admit("ann", t));
        assert!(b.admit("ann", t));
        assert!(!b.admit("ann", t + Duration::from_secs(1)));
        assert!(b.admit("bob", t), "users are limited apart");
        assert!(
            b.admit("ann", t + Duration::from_secs(10)),
            "the window slides"
        );
        let mut unlimited = BurstLimit::new(0, Duration::from_secs(1));
        assert!((0..10_000).all(|_| unlimited.admit("ann", t)));
    }
}
