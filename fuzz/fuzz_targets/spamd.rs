//! Any bytes as a spamd request, fed in two pieces at a point the input chooses: the
//! decoder answers with a request, a protocol error or a wish for more; never a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use spamnb::spamd::codec::{Decoder, Step};

fuzz_target!(|data: &[u8]| {
    let Some((&split, data)) = data.split_first() else {
        return;
    };
    let at = (split as usize).min(data.len());
    let mut decoder = Decoder::new(64 * 1024);
    let mut done = false;
    for piece in [&data[..at], &data[at..]] {
        decoder.wants();
        match decoder.feed(piece) {
            Ok(Step::NeedMore) => {}
            Ok(Step::Request(_)) | Err(_) => {
                done = true;
                break;
            }
        }
    }
    if !done {
        let _ = decoder.finish();
    }
});
