#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agw_fuzz::targets::agent_definition(data));
