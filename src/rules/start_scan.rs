//! Where an anchored set's runs may begin in a text, as a bit mask per 64 bytes.
//!
//! This reads every byte of every text an anchored set is given (bodies, HTML, Received
//! lines), and byte by byte, a table lookup and an AND each, it was a quarter of what
//! spamnb's rules cost. With AVX2 the same masks come 32 bytes at a time from nibble-table
//! lookups ("truffle", as Hyperscan calls it): a byte is in a set when the table row of its
//! low nibble has the bit of its high nibble.

/// Where a match may begin with a given byte: bits of a [`Starts`] table.
pub(super) const ANYWHERE: u8 = 1;
pub(super) const AT_WORD_START: u8 = 2;
pub(super) const AT_LINE_START: u8 = 4;

/// Per byte, where a match may begin with it: bits `ANYWHERE`, `AT_WORD_START`,
/// `AT_LINE_START`.
pub(super) type Starts = [u8; 256];

/// Per byte, the places a match may begin right after it: anywhere, a word start after a
/// byte not of a word, a line start after a line end. With a [`Starts`] table it makes the
/// test at each byte two lookups and an AND, not a chain of branches.
const BEGINS_AFTER: [u8; 256] = {
    let mut after = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        after[b] = ANYWHERE
            | if super::is_word_byte(byte) {
                0
            } else {
                AT_WORD_START
            }
            | if is_line_end(byte) { AT_LINE_START } else { 0 };
        b += 1;
    }
    after
};

/// The places a match may begin at the start of the text.
const BEGINS_FIRST: u8 = ANYWHERE | AT_WORD_START | AT_LINE_START;

const fn is_line_end(b: u8) -> bool {
    b == b'\n' || b == b'\r'
}

pub(super) struct StartScan {
    starts: Starts,
    #[cfg(target_arch = "x86_64")]
    wide: Option<wide::Tables>,
}

impl StartScan {
    pub(super) fn new(starts: Starts) -> StartScan {
        StartScan {
            #[cfg(target_arch = "x86_64")]
            wide: std::arch::is_x86_feature_detected!("avx2").then(|| wide::Tables::new(&starts)),
            starts,
        }
    }

    /// Bit `i` set when a run may begin at `block[i]` (64 bytes at most); `before` is the
    /// byte before the block, `None` at the start of the text.
    pub(super) fn candidates(&self, block: &[u8], before: Option<u8>) -> u64 {
        debug_assert!(block.len() <= 64);
        #[cfg(target_arch = "x86_64")]
        if let Some(tables) = &self.wide {
            // SAFETY: `tables` exists only where the CPU has AVX2.
            return unsafe { tables.candidates(block, before) };
        }
        self.candidates_bytewise(block, before)
    }

    fn candidates_bytewise(&self, block: &[u8], before: Option<u8>) -> u64 {
        let mut allowed = before.map_or(BEGINS_FIRST, |b| BEGINS_AFTER[usize::from(b)]);
        // No branch per byte: one in six bytes begins a word, too many and too irregular
        // to predict.
        let mut candidates = 0u64;
        for (i, &byte) in block.iter().enumerate() {
            candidates |= u64::from(self.starts[usize::from(byte)] & allowed != 0) << i;
            allowed = BEGINS_AFTER[usize::from(byte)];
        }
        candidates
    }
}

#[cfg(target_arch = "x86_64")]
mod wide {
    use std::arch::x86_64::*;

    use super::{ANYWHERE, AT_LINE_START, AT_WORD_START, Starts, is_line_end};

    /// A byte set as truffle's two tables: by low nibble, a bit per value of the high
    /// nibble's lower three bits, for bytes below 0x80 and from 0x80 up.
    #[derive(Clone, Copy)]
    struct ByteSet {
        low_half: [u8; 16],
        high_half: [u8; 16],
    }

    impl ByteSet {
        fn of(member: impl Fn(u8) -> bool) -> ByteSet {
            let mut set = ByteSet {
                low_half: [0; 16],
                high_half: [0; 16],
            };
            for b in 0..=255u8 {
                if member(b) {
                    let row = if b < 0x80 {
                        &mut set.low_half
                    } else {
                        &mut set.high_half
                    };
                    row[usize::from(b & 0x0f)] |= 1 << ((b >> 4) & 7);
                }
            }
            set
        }
    }

    pub(super) struct Tables {
        anywhere: ByteSet,
        at_word_start: ByteSet,
        at_line_start: ByteSet,
        word: ByteSet,
    }

    impl Tables {
        pub(super) fn new(starts: &Starts) -> Tables {
            let with = |bit: u8| ByteSet::of(|b| starts[usize::from(b)] & bit != 0);
            Tables {
                anywhere: with(ANYWHERE),
                at_word_start: with(AT_WORD_START),
                at_line_start: with(AT_LINE_START),
                word: ByteSet::of(super::super::is_word_byte),
            }
        }

        /// What `StartScan::candidates_bytewise` computes, 32 bytes at a time.
        ///
        /// # Safety
        /// The CPU must have AVX2.
        #[target_feature(enable = "avx2")]
        pub(super) unsafe fn candidates(&self, block: &[u8], before: Option<u8>) -> u64 {
            // A short block (a text's last) is read from a padded copy; its masks are cut
            // to its length.
            let mut padded = [0u8; 64];
            let bytes: &[u8; 64] = match block.try_into() {
                Ok(full) => full,
                Err(_) => {
                    padded[..block.len()].copy_from_slice(block);
                    &padded
                }
            };
            let [anywhere, word_start, line_start, word, line_end] = [0, 32]
                .map(|at| {
                    // SAFETY: `at + 32 <= 64`: 32 bytes in bounds; loadu needs no alignment.
                    let v = unsafe { _mm256_loadu_si256(bytes[at..].as_ptr().cast()) };
                    masks(self, v)
                })
                .iter()
                .rev()
                .fold([0u64; 5], |acc, half| {
                    std::array::from_fn(|i| acc[i] << 32 | u64::from(half[i]))
                });
            let within = if block.len() == 64 {
                u64::MAX
            } else {
                (1u64 << block.len()) - 1
            };
            // Bit i of these: whether the byte before byte i is of a word, or a line end.
            let word_before = word << 1 | u64::from(before.is_some_and(super::super::is_word_byte));
            let line_end_before = line_end << 1 | u64::from(before.is_none_or(is_line_end));
            (anywhere | word_start & !word_before | line_start & line_end_before) & within
        }
    }

    /// The five masks of 32 bytes: in `anywhere`, `at_word_start`, `at_line_start`, `word`,
    /// and line ends.
    #[target_feature(enable = "avx2")]
    fn masks(t: &Tables, v: __m256i) -> [u32; 5] {
        // Per byte, the bit its high nibble's lower three bits pick: one lookup, shared by
        // every set. (No 8-bit shift: shift 16-bit lanes, then mask.)
        let bit_of = _mm256_setr_epi8(
            1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64,
            -128, 1, 2, 4, 8, 16, 32, 64, -128,
        );
        let high = _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x07));
        let bit = _mm256_shuffle_epi8(bit_of, high);
        // pshufb gives 0 where the index has its top bit: the low table answers for bytes
        // below 0x80, the high table (indexed with the top bit flipped) for the others.
        let flipped = _mm256_xor_si256(v, _mm256_set1_epi8(-128));
        let member = |set: &ByteSet| {
            // SAFETY: 16-byte loads from 16-byte arrays.
            let (low, high_half) = unsafe {
                (
                    _mm_loadu_si128(set.low_half.as_ptr().cast()),
                    _mm_loadu_si128(set.high_half.as_ptr().cast()),
                )
            };
            let rows = _mm256_or_si256(
                _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(low), v),
                _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(high_half), flipped),
            );
            let hit = _mm256_and_si256(rows, bit);
            !(_mm256_movemask_epi8(_mm256_cmpeq_epi8(hit, _mm256_setzero_si256())) as u32)
        };
        let line_end = _mm256_or_si256(
            _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\n' as i8)),
            _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\r' as i8)),
        );
        [
            member(&t.anywhere),
            member(&t.at_word_start),
            member(&t.at_line_start),
            member(&t.word),
            _mm256_movemask_epi8(line_end) as u32,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A byte for start tables and texts: every value, and the bytes mail is made of more
    /// often.
    fn noise(rand: &mut impl FnMut() -> u64) -> u8 {
        let r = (rand() >> 24) as u8;
        match r % 4 {
            0 => r,
            1 => b" \n\r\t_"[usize::from(r) % 5],
            _ => b'a' + r % 26,
        }
    }

    #[test]
    fn wide_and_bytewise_scans_agree() {
        let mut rand = crate::xorshift(0x2545_f491_4f6c_dd1d);
        for round in 0..200 {
            let mut starts = [0u8; 256];
            for _ in 0..(round % 40) {
                let b = noise(&mut rand);
                starts[usize::from(b)] |= 1 << (noise(&mut rand) % 3);
            }
            let scan = StartScan::new(starts);
            // Where the CPU has AVX2, the wide scan is the one under test.
            #[cfg(target_arch = "x86_64")]
            assert_eq!(
                scan.wide.is_some(),
                std::arch::is_x86_feature_detected!("avx2")
            );
            let len = usize::from(noise(&mut rand)) % 65;
            let block: Vec<u8> = (0..len).map(|_| noise(&mut rand)).collect();
            let before = (round % 3 != 0).then(|| noise(&mut rand));
            assert_eq!(
                scan.candidates(&block, before),
                scan.candidates_bytewise(&block, before),
                "starts {starts:?} block {block:?} before {before:?}"
            );
        }
    }

    #[test]
    fn word_and_line_starts_are_told_by_the_byte_before() {
        let mut starts = [0u8; 256];
        starts[usize::from(b'f')] = AT_WORD_START;
        starts[usize::from(b'S')] = AT_LINE_START;
        starts[usize::from(b'$')] = ANYWHERE;
        let scan = StartScan::new(starts);
        let at = |block: &[u8], before| {
            let m = scan.candidates(block, before);
            (0..block.len())
                .filter(|i| m >> i & 1 == 1)
                .collect::<Vec<_>>()
        };
        assert_eq!(at(b"free offer fee", None), [0, 11]);
        assert_eq!(at(b"free", Some(b'x')), Vec::<usize>::new());
        assert_eq!(at(b"Subject\nSo $5", None), [0, 8, 11]);
        assert_eq!(at(b"So", Some(b'\r')), [0]);
    }
}
