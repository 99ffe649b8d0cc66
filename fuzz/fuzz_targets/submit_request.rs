#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agw_fuzz::targets::submit_request(data));
