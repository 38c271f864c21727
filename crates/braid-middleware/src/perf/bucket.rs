//! The optional per-tenant token bucket (the artifact's `TB_TARGET_RATE` / `TB_BURST_SIZE`):
//! a time-based bucket in bytes whose level may go negative by one message, so the average rate
//! is exact whatever the message size.

/// The token bucket (bytes; the level may go negative by one message).
#[derive(Debug, Clone, Copy)]
pub struct Bucket {
    pub rate_bps: f64,
    pub burst: f64,
    pub level: f64,
    pub at: u64,
}

impl Bucket {
    pub fn refill(&mut self, now: u64) {
        let dt = now.saturating_sub(self.at) as f64 / 1e12;
        self.level = (self.level + dt * self.rate_bps / 8.0).min(self.burst);
        self.at = now;
    }
    /// When the level is positive again.
    pub fn ready_at(&self) -> u64 {
        self.at + ((-self.level + 1.0) * 8.0 / self.rate_bps * 1e12).ceil() as u64
    }
}
