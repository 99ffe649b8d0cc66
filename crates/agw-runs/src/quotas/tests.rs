use super::*;

fn quotas(subject: QuotaLimits, agent: QuotaLimits, reserve_tokens: u64) -> Arc<Quotas> {
    Arc::new(Quotas::new(QuotaSettings { subject, agent, reserve_tokens }))
}

fn user(sub: &str, tenant: Option<&str>) -> Owner {
    Owner { sub: sub.to_owned(), tenant: tenant.map(str::to_owned) }
}

fn alice() -> Owner {
    user("alice", None)
}

fn spend(permit: &QuotaPermit, tokens: u64, cost: Option<f64>) {
    let gate = permit.gate().expect("a daily limit: the run has a gate");
    futures::executor::block_on(gate.spent(CallSpend { tokens, cost }));
}

fn may_call(permit: &QuotaPermit) -> Result<(), QuotaRefused> {
    futures::executor::block_on(permit.gate().expect("a gate").may_call())
}

#[test]
fn concurrency_is_reserved_at_admission_and_released_on_drop() {
    let q = quotas(QuotaLimits { concurrent_runs: 2, ..Default::default() }, QuotaLimits::default(), 0);
    let a = q.admit(&alice(), "x").expect("first");
    let _b = q.admit(&alice(), "x").expect("second");
    let refused = q.admit(&alice(), "x").expect_err("third");
    assert_eq!(
        (refused.quota.as_str(), refused.key.as_str(), refused.limit.as_str()),
        ("subject.concurrent-runs", "alice", "2")
    );
    assert!(q.admit(&user("bob", None), "x").is_ok(), "per subject");
    assert!(a.gate().is_none(), "no daily limit: no check before each model call");
    drop(a);
    assert!(q.admit(&alice(), "x").is_ok());
}

#[test]
fn the_same_subject_in_two_tenants_are_two_owners() {
    let q = quotas(QuotaLimits { tokens_per_day: 100, ..Default::default() }, QuotaLimits::default(), 0);
    let t1 = q.admit(&user("alice", Some("t1")), "x").unwrap();
    spend(&t1, 100, None);
    let refused = q.admit(&user("alice", Some("t1")), "x").expect_err("t1 spent its day");
    assert_eq!((refused.quota.as_str(), refused.key.as_str()), ("subject.tokens-per-day", "alice (tenant t1)"));
    assert!(q.admit(&user("alice", Some("t2")), "x").is_ok(), "alice of t2 is another user");
    assert!(q.admit(&user("alice", None), "x").is_ok(), "and so is alice without a tenant");
}

#[test]
fn owner_keys_in_redis_are_unambiguous() {
    let key = |sub: &str, tenant: Option<&str>| Key::Owner(user(sub, tenant)).shared_base();
    assert_eq!(key("alice", Some("t1")), r#"quota:owner:["t1","alice"]"#);
    assert_eq!(key("alice", None), r#"quota:owner:[null,"alice"]"#);
    assert_ne!(key("b:c", Some("a")), key("c", Some("a:b")), "a colon in either part cannot shift the split");
    assert_ne!(key("x\",\"y", Some("t")), key("y", Some("t\",\"x")));
    assert_eq!(Key::Agent("bot".into()).shared_base(), "quota:agent:bot", "agent keys are unchanged");
}

#[test]
fn runs_per_minute_and_daily_spend_per_agent() {
    let agent = QuotaLimits { runs_per_minute: 2, tokens_per_day: 100, ..Default::default() };
    let q = quotas(QuotaLimits::default(), agent, 0);
    let first = q.admit(&user("a", None), "bot").unwrap();
    spend(&first, 60, None);
    drop(q.admit(&user("b", None), "bot").unwrap());
    let refused = q.admit(&user("c", None), "bot").expect_err("third run in the minute");
    assert_eq!(refused.quota, "agent.runs-per-minute");
    assert!(refused.retry_after <= MINUTE && refused.retry_after > Duration::from_secs(50));

    let q2 = quotas(QuotaLimits::default(), QuotaLimits { tokens_per_day: 100, ..Default::default() }, 0);
    let run = q2.admit(&user("a", None), "bot").unwrap();
    assert!(may_call(&run).is_ok());
    spend(&run, 100, None);
    let refused = may_call(&run).expect_err("the next call of the same run is refused");
    assert!(refused.0.contains("agent.tokens-per-day of bot reached (limit 100)"), "{refused}");
    let refused = q2.admit(&user("a", None), "bot").expect_err("tokens spent");
    assert_eq!(refused.quota, "agent.tokens-per-day");
    assert!(refused.retry_after <= Duration::from_secs(86_400) && refused.retry_after > Duration::from_secs(1));
}

#[test]
fn admission_reserves_tokens_that_calls_settle_and_the_end_releases() {
    let q = quotas(QuotaLimits { tokens_per_day: 2_500, ..Default::default() }, QuotaLimits::default(), 1_000);
    let a = q.admit(&alice(), "x").unwrap();
    let b = q.admit(&alice(), "x").unwrap();
    assert_eq!(q.owner_tokens(&alice()), (0, 2_000));
    let c = q.admit(&alice(), "x").expect("500 of the day are neither spent nor reserved");
    let held = q.admit(&alice(), "x").expect_err("3,000 reserved of 2,500");
    assert_eq!(held.quota, "subject.tokens-per-day");
    assert_eq!(held.retry_after, HELD_RETRY, "held, not spent: the reservations go when the runs end");
    drop(c);

    // A call's usage replaces as much of the estimate.
    spend(&a, 300, None);
    assert_eq!(q.owner_tokens(&alice()), (300, 1_700));
    spend(&a, 900, None);
    assert_eq!(q.owner_tokens(&alice()), (1_200, 1_000), "never more than the run reserved is settled");
    // Reservations do not refuse a running run's calls, only new runs.
    assert!(may_call(&a).is_ok());
    drop(b);
    assert_eq!(q.owner_tokens(&alice()), (1_200, 0));
    drop(a);
    assert_eq!(q.owner_tokens(&alice()), (1_200, 0));
    assert!(q.admit(&alice(), "x").is_ok());
}

#[test]
fn a_daily_cost_limit_refuses_the_next_call_and_unpriced_calls_cost_nothing() {
    let q = quotas(QuotaLimits { cost_per_day: 0.01, ..Default::default() }, QuotaLimits::default(), 0);
    let run = q.admit(&alice(), "x").unwrap();
    spend(&run, 5_000, None);
    assert!(may_call(&run).is_ok(), "no price: no cost");
    spend(&run, 10, Some(0.004));
    assert!(may_call(&run).is_ok());
    spend(&run, 10, Some(0.006));
    let refused = may_call(&run).expect_err("0.01 reached");
    assert!(refused.0.contains("subject.cost-per-day of alice reached (limit 0.01)"), "{refused}");
}

#[test]
fn no_limits_take_no_lock() {
    let q = quotas(QuotaLimits::default(), QuotaLimits::default(), 1_000);
    for _ in 0..100 {
        assert!(q.admit(&alice(), "b").unwrap().gate().is_none());
    }
    assert!(q.is_untouched());
}
