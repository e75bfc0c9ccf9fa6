package replay

import (
	"hash/fnv"
	"strconv"

	"github.com/tokentrace/tokentrace/traces"
)

// promptBuilder makes deterministic prompts. A prompt is a sequence of
// "units": token ids on /v1/completions, words on chat. Units come from
// three sources, in order:
//
//  1. prefix blocks: unit j of block id b depends only on (b, j), so records
//     sharing a block id share those units byte for byte;
//  2. a category prefix (no blocks): unit j depends only on (category, j);
//  3. the rest: unique per request, from (run, seq, j).
type promptBuilder struct {
	blockSize int
	idMin     uint64
	idSpan    uint64
	runSalt   uint64
}

func newPromptBuilder(o *Options, blockSize int) *promptBuilder {
	if blockSize <= 0 {
		blockSize = o.BlockSize
	}
	return &promptBuilder{
		blockSize: blockSize,
		idMin:     uint64(o.TokenIDMin),
		idSpan:    uint64(o.TokenIDMax - o.TokenIDMin),
		runSalt:   hashString("run:" + o.Run),
	}
}

func hashString(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// splitmix64 is a fast, well-mixed hash of one word.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

const (
	saltBlock    = 0x626c6f636b000000 // "block"
	saltCategory = 0x6361746567000000 // "categ"
	saltUnique   = 0x756e697175000000 // "uniqu"
)

// units calls emit(u) for each of n units of rec's prompt, u a 64-bit hash
// the caller maps to a token id or a word. unique salts the per-request part.
func (b *promptBuilder) units(rec *traces.Record, n int, unique uint64, emit func(u uint64)) {
	j := 0
	if len(rec.PrefixBlocks) > 0 {
		for _, blk := range rec.PrefixBlocks {
			base := splitmix64(uint64(blk) ^ saltBlock)
			for k := 0; k < b.blockSize && j < n; k++ {
				emit(splitmix64(base + uint64(k)))
				j++
			}
			if j >= n {
				return
			}
		}
	} else if rec.Category != "" && rec.PrefixTokens > 0 {
		base := splitmix64(hashString("category:"+rec.Category) ^ saltCategory)
		for k := 0; k < int(rec.PrefixTokens) && j < n; k++ {
			emit(splitmix64(base + uint64(k)))
			j++
		}
	}
	base := splitmix64(b.runSalt ^ splitmix64(uint64(rec.Seq)^saltUnique) ^ unique)
	for ; j < n; j++ {
		emit(splitmix64(base + uint64(j)))
	}
}

// appendTokenIDs appends "[id,id,...]" of exactly n token ids.
func (b *promptBuilder) appendTokenIDs(dst []byte, rec *traces.Record, n int, unique uint64) []byte {
	dst = b.appendUnits(append(dst, '['), b.units, rec, n, unique, true)
	return append(dst, ']')
}

// appendUnits appends the n units gen yields for rec: token ids separated
// by commas (ids), else words separated by spaces.
func (b *promptBuilder) appendUnits(dst []byte, gen func(*traces.Record, int, uint64, func(uint64)), rec *traces.Record, n int, unique uint64, ids bool) []byte {
	first := true
	gen(rec, n, unique, func(u uint64) {
		switch {
		case ids:
			if !first {
				dst = append(dst, ',')
			}
			dst = strconv.AppendUint(dst, b.idMin+u%b.idSpan, 10)
		default:
			if !first {
				dst = append(dst, ' ')
			}
			dst = append(dst, words[u%uint64(len(words))]...)
		}
		first = false
	})
	return dst
}

// appendWords appends n space-separated common English words (JSON-safe, no
// escaping needed). Each word is a single token in common BPE and
// SentencePiece vocabularies, so n words ≈ n tokens; calibrate() measures
// the rest.
func (b *promptBuilder) appendWords(dst []byte, rec *traces.Record, n int, unique uint64) []byte {
	return b.appendUnits(dst, b.units, rec, n, unique, false)
}

// words are frequent lowercase English words of at most four letters:
// with their leading space each is one token in GPT, Llama and Qwen
// vocabularies and in the built-in simulator's tokenizer.
var words = []string{
	"the", "of", "and", "to", "in", "is", "for", "that", "on", "with",
	"as", "was", "by", "at", "it", "from", "be", "this", "are", "or",
	"an", "have", "not", "his", "but", "they", "has", "were", "had", "one",
	"all", "you", "we", "can", "her", "more", "been", "new", "also", "when",
	"who", "time", "into", "some", "only", "most", "what", "over", "two", "out",
	"such", "may", "many", "up", "than", "them", "made", "used", "no", "then",
	"year", "work", "city", "part", "each", "well", "both", "same", "life", "long",
	"use", "day", "back", "end", "war", "high", "area", "name", "game", "own",
	"law", "set", "way", "line", "old", "team", "form", "best", "take", "left",
	"play", "does", "land", "must", "home", "book", "film", "site", "town", "main",
	"rock", "girl", "king", "boy", "club", "word", "song", "love", "base", "road",
	"free", "army", "post", "fire", "race", "ship", "door", "food", "band", "rule",
	"sea", "key", "hand", "eye", "face", "head", "wife", "bird", "tree", "star",
	"park", "cost", "fact",
}

// PromptTokens returns the n token ids Run sends as rec's prompt on
// /v1/completions under options o (its Run name salts the unique part;
// blockSize is the trace's block size, 0 for o.BlockSize). An offline
// simulation given these prompts sees exactly the shared prefixes a replay
// would show the server.
func PromptTokens(rec *traces.Record, o Options, blockSize int) []int32 {
	b := newPromptBuilder(&o, blockSize)
	n := max(int(rec.InputTokens), 1)
	ids := make([]int32, 0, n)
	b.units(rec, n, 0, func(u uint64) { ids = append(ids, int32(b.idMin+u%b.idSpan)) })
	return ids
}
