//! The heavy-tailed rank-frequency distribution of user ids (LevelDB++ §5.1, Figure 7): the user
//! of rank `r` (1-based) tweets with probability proportional to `r^-exponent` (Zipf). Ranks are
//! mapped to user ids through a seeded permutation so that popularity is not correlated with the
//! id value (a range of ten consecutive ids holds ten users of unrelated popularity, as real
//! Twitter ids do).

use crate::random::Random;

/// Sampling table for the user distribution: a cumulative weight per rank (binary-searched per
/// draw) and the rank -> user id permutation. Memory: 12 bytes per user.
#[derive(Debug, Clone)]
pub struct UserDistribution {
    /// `cumulative[i]` = sum of the weights of ranks `1..=i+1`, normalised so the last is 1.
    cumulative: Vec<f64>,
    /// `user_ids[rank - 1]` is the id of the user of that rank; the ids are exactly `1..=users`.
    user_ids: Vec<u32>,
}

impl UserDistribution {
    /// Builds the table for `users` users (>= 1) and a Zipf `exponent` (finite, >= 0); the
    /// permutation of ids is drawn from `random`.
    pub fn new(users: u32, exponent: f64, random: &mut Random) -> Self {
        let users = users.max(1);
        let mut cumulative = Vec::with_capacity(users as usize);
        let mut total = 0.0f64;
        for rank in 1..=users {
            total += f64::from(rank).powf(-exponent);
            cumulative.push(total);
        }
        for weight in &mut cumulative {
            *weight /= total;
        }
        // Rounding could leave the last entry a hair below 1; a draw of 0.999... must still land.
        if let Some(last) = cumulative.last_mut() {
            *last = 1.0;
        }
        let mut user_ids: Vec<u32> = (1..=users).collect();
        // Fisher-Yates.
        for index in (1..user_ids.len()).rev() {
            let other = random.below(index as u64 + 1) as usize;
            user_ids.swap(index, other);
        }
        Self {
            cumulative,
            user_ids,
        }
    }

    /// Number of users (distinct ids, `1..=users`).
    pub fn users(&self) -> u32 {
        self.user_ids.len() as u32
    }

    /// Draws a 0-based rank (0 = most frequent user).
    pub fn sample_rank(&self, random: &mut Random) -> u32 {
        let draw = random.unit();
        let index = self.cumulative.partition_point(|&weight| weight <= draw);
        index.min(self.cumulative.len() - 1) as u32
    }

    /// The user id of a 0-based rank.
    pub fn user_id(&self, rank: u32) -> u32 {
        self.user_ids[rank as usize]
    }

    /// Probability of the user of 0-based `rank`.
    pub fn probability(&self, rank: u32) -> f64 {
        let index = rank as usize;
        let below = if index == 0 {
            0.0
        } else {
            self.cumulative[index - 1]
        };
        self.cumulative[index] - below
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frequencies_follow_the_weights() {
        let mut random = Random::new(3, 0);
        let distribution = UserDistribution::new(100, 1.0, &mut random);
        let mut counts = vec![0u32; 100];
        let draws = 200_000;
        for _ in 0..draws {
            counts[distribution.sample_rank(&mut random) as usize] += 1;
        }
        for rank in [0u32, 1, 9, 99] {
            let expected = distribution.probability(rank) * f64::from(draws);
            let seen = f64::from(counts[rank as usize]);
            assert!(
                (seen - expected).abs() < 5.0 * expected.sqrt() + 5.0,
                "rank {rank}: {seen} vs {expected}"
            );
        }
        assert!(counts[0] > 10 * counts[99]);
    }

    #[test]
    fn ids_are_a_permutation() {
        let mut random = Random::new(4, 0);
        let distribution = UserDistribution::new(1000, 0.9, &mut random);
        let mut ids: Vec<u32> = (0..1000).map(|rank| distribution.user_id(rank)).collect();
        assert_ne!(ids[..10], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        ids.sort_unstable();
        assert_eq!(ids, (1..=1000).collect::<Vec<u32>>());
        let single = UserDistribution::new(1, 1.0, &mut random);
        assert_eq!(single.sample_rank(&mut random), 0);
        assert_eq!(single.user_id(0), 1);
    }
}
