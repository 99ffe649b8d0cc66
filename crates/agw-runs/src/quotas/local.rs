//! The quota counters of one process: every decision under one lock.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use agw_memory::Owner;
use agw_modes::runtime::CallSpend;

use super::{
    Account, HELD_RETRY, Key, MINUTE, QuotaExceeded, QuotaPermit, Scope, Store, scopes, today, until_midnight,
};
use super::{QuotaLimits, QuotaSettings};

#[derive(Debug, Default)]
struct Counters {
    running: u32,
    /// Starts within the last minute, oldest first.
    starts: VecDeque<Instant>,
    /// Days since the epoch (UTC) the spend and reservations below count.
    day: i64,
    tokens: u64,
    cost: f64,
    /// Tokens reserved by admitted runs whose calls have not used them yet.
    reserved: u64,
}

impl Counters {
    fn roll(&mut self, now: Instant, day: i64) {
        while self.starts.front().is_some_and(|t| now.duration_since(*t) >= MINUTE) {
            self.starts.pop_front();
        }
        if self.day != day {
            self.day = day;
            self.tokens = 0;
            self.cost = 0.0;
            self.reserved = 0;
        }
    }

    /// What refuses a new run: each limit, the daily tokens counting the reservations of runs
    /// in flight.
    fn admission(&self, limits: &QuotaLimits, now: Instant) -> Option<(&'static str, String, Duration)> {
        if limits.concurrent_runs > 0 && self.running >= limits.concurrent_runs {
            return Some(("concurrent-runs", limits.concurrent_runs.to_string(), Duration::from_secs(1)));
        }
        if limits.runs_per_minute > 0 && self.starts.len() >= limits.runs_per_minute as usize {
            let oldest = self.starts.front().copied().unwrap_or(now);
            let wait = MINUTE.saturating_sub(now.duration_since(oldest));
            return Some(("runs-per-minute", limits.runs_per_minute.to_string(), wait));
        }
        if limits.tokens_per_day > 0 && self.tokens.saturating_add(self.reserved) >= limits.tokens_per_day {
            let wait = if self.tokens >= limits.tokens_per_day { until_midnight() } else { HELD_RETRY };
            return Some(("tokens-per-day", limits.tokens_per_day.to_string(), wait));
        }
        self.daily(limits)
    }

    /// What refuses a model call: the day's spend reached a daily limit.
    fn daily(&self, limits: &QuotaLimits) -> Option<(&'static str, String, Duration)> {
        if limits.tokens_per_day > 0 && self.tokens >= limits.tokens_per_day {
            return Some(("tokens-per-day", limits.tokens_per_day.to_string(), until_midnight()));
        }
        if limits.cost_per_day > 0.0 && self.cost >= limits.cost_per_day {
            return Some(("cost-per-day", limits.cost_per_day.to_string(), until_midnight()));
        }
        None
    }
}

/// The quota counters of this process.
#[derive(Debug, Default)]
pub struct Quotas {
    settings: QuotaSettings,
    counters: Mutex<HashMap<Key, Counters>>,
}

impl Quotas {
    /// Counters for these limits.
    pub fn new(settings: QuotaSettings) -> Self {
        Self { settings, counters: Mutex::default() }
    }

    /// The limits counted.
    pub fn settings(&self) -> &QuotaSettings {
        &self.settings
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Key, Counters>> {
        self.counters.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Admits a run of `agent` for `owner` and counts it (in flight, started, its reservation),
    /// or says which quota refuses it. Without any limit configured this takes no lock.
    pub fn admit(self: &Arc<Self>, owner: &Owner, agent: &str) -> Result<QuotaPermit, QuotaExceeded> {
        let scopes = scopes(&self.settings, owner, agent);
        if scopes.is_empty() {
            return Ok(QuotaPermit::unlimited());
        }
        let (now, day) = (Instant::now(), today());
        let reserve = self.settings.reserve_tokens;
        let mut counters = self.lock();
        for scope in &scopes {
            let entry = counters.entry(scope.key.clone()).or_default();
            entry.roll(now, day);
            if let Some((name, limit, retry_after)) = entry.admission(&scope.limits, now) {
                return Err(QuotaExceeded::new(&scope.key, name, limit, retry_after));
            }
        }
        for scope in &scopes {
            let entry = counters.entry(scope.key.clone()).or_default();
            entry.running += 1;
            entry.starts.push_back(now);
            if reserve > 0 && scope.limits.tokens_per_day > 0 {
                entry.reserved = entry.reserved.saturating_add(reserve);
                scope.reserves.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        drop(counters);
        let reserved = if scopes.iter().any(Scope::reserves) { reserve } else { 0 };
        let account =
            Account { scopes, store: Store::Local(self.clone()), day, reserved: Mutex::new(reserved), in_flight: true };
        Ok(QuotaPermit { account: Some(Arc::new(account)) })
    }

    /// Before a model call: the first daily limit of the run's keys the day's spend reached.
    pub(super) fn check_daily(&self, account: &Account) -> Option<QuotaExceeded> {
        let (now, day) = (Instant::now(), today());
        let mut counters = self.lock();
        account.scopes.iter().filter(|s| s.limits.daily()).find_map(|scope| {
            let entry = counters.entry(scope.key.clone()).or_default();
            entry.roll(now, day);
            let (name, limit, retry_after) = entry.daily(&scope.limits)?;
            Some(QuotaExceeded::new(&scope.key, name, limit, retry_after))
        })
    }

    /// One model call's usage: added to today's spend of each key with a daily limit, `settled`
    /// taken off the reservations the run holds.
    pub(super) fn spend(&self, account: &Account, spend: CallSpend, settled: u64) {
        let (now, day) = (Instant::now(), today());
        let mut counters = self.lock();
        for scope in account.scopes.iter().filter(|s| s.limits.daily()) {
            let entry = counters.entry(scope.key.clone()).or_default();
            unreserve(entry, scope, account.day, settled);
            entry.roll(now, day);
            entry.tokens = entry.tokens.saturating_add(spend.tokens);
            entry.cost += spend.cost.unwrap_or(0.0);
        }
    }

    /// The run ended: it no longer counts as in flight, and what it still reserved goes back.
    pub(super) fn release(&self, account: &Account, reserved: u64) {
        let mut counters = self.lock();
        for scope in &account.scopes {
            if let Some(entry) = counters.get_mut(&scope.key) {
                unreserve(entry, scope, account.day, reserved);
                if account.in_flight {
                    entry.running = entry.running.saturating_sub(1);
                }
            }
        }
    }
}

/// Takes `tokens` off a key's reservations — only while its counters still count the day the
/// reservation was taken (a new day starts with none).
fn unreserve(entry: &mut Counters, scope: &Scope, day: i64, tokens: u64) {
    if scope.reserves() && entry.day == day {
        entry.reserved = entry.reserved.saturating_sub(tokens);
    }
}

#[cfg(test)]
impl Quotas {
    /// The day's tokens spent and reserved under an owner's key.
    pub(super) fn owner_tokens(&self, owner: &Owner) -> (u64, u64) {
        self.lock().get(&Key::Owner(owner.clone())).map_or((0, 0), |c| (c.tokens, c.reserved))
    }

    /// Whether any key was counted.
    pub(super) fn is_untouched(&self) -> bool {
        self.lock().is_empty()
    }
}
