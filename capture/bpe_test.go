package capture

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var bpeCorpus = []string{
	"Hello, world! It's a TEST of they'RE we'LL I'd you've I'M don't.",
	"  leading spaces\n\n\ttabs\r\n\r\nCRLF lines   \n trailing   ",
	"numbers 1 12 123 1234 12345 3.14159 1e10 ٣٤٥ ² ½ Ⅻ",
	"Ünïcödé façade naïve coöperate Straße ĲSSEL ǅemal",
	"日本語のテキスト、中文文本。한국어 텍스트",
	"Ελληνικά κείμενα, русский текст, עברית, العربية",
	"emoji 😀👍🏽 flags 🇺🇸 zwj 👨‍👩‍👧",
	"combining: e\u0301 a\u0308 \u0301start x\u20dd",
	"code: func main() { fmt.Println(\"hi\") } // comment /* block */ a/b/c\n/path/to/file",
	"mixed CamelCaseWords and snake_case_words and UPPERCASE and lowerCASEUpper",
	"punct!!! ??? ... --- *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}}",
	" 's 't ' 'x '' ''s",
	"\u00a0nbsp\u2003em\u3000ideographic\u200bzero-width\u2028line\u2029para",
	"ʰʲ modifier ʼapostrophe ˈstress",
	"A\nB\r\nC\rD\n\n\nE \n F",
	"",
	" ",
	"\n",
	"x",
	"  ",
	"Ⓐⓑ ℌ ℕ ℤ ⅈ",
	"ǈ ǋ ǲ ᾈ ᾙ",
}

func tiktokenIDs(t testing.TB, name, s string) []int {
	enc, err := encoder(name)
	if err != nil {
		t.Fatal(err)
	}
	return enc.EncodeOrdinary(s)
}

func TestFastBPEMatchesTiktoken(t *testing.T) {
	texts := append([]string{}, bpeCorpus...)
	for _, f := range []string{"openai.jsonl", "litellm.jsonl", "vllm_old.log", "vllm_new.log", "otlp.jsonl"} {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, string(b))
	}
	texts = append(texts, strings.Join(bpeCorpus, ""), strings.Join(bpeCorpus, " "))
	if !raceEnabled {
		texts = append(texts, string(sampleLogs(t, 5, 2*time.Second)))
	}
	for _, name := range []string{"o200k_base", "cl100k_base"} {
		fe, err := fastEncoder(name)
		if err != nil || fe == nil {
			t.Fatal(err)
		}
		for i, s := range texts {
			want := tiktokenIDs(t, name, s)
			got := fe.encode(nil, s)
			if !slices.Equal(got, want) {
				// find the first difference for the message
				j := 0
				for j < len(got) && j < len(want) && got[j] == want[j] {
					j++
				}
				t.Errorf("%s text %d: %d tokens vs tiktoken %d; first difference at token %d", name, i, len(got), len(want), j)
			}
		}
	}
}

func FuzzFastBPE(f *testing.F) {
	for _, s := range bpeCorpus {
		f.Add(s)
	}
	fe, err := fastEncoder("o200k_base")
	if err != nil {
		f.Fatal(err)
	}
	fc, err := fastEncoder("cl100k_base")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			s = string(bytes.ToValidUTF8([]byte(s), []byte("\uFFFD")))
		}
		if got, want := fe.encode(nil, s), tiktokenIDs(t, "o200k_base", s); !slices.Equal(got, want) {
			t.Fatalf("o200k %q: %v, tiktoken %v", s, got, want)
		}
		if got, want := fc.encode(nil, s), tiktokenIDs(t, "cl100k_base", s); !slices.Equal(got, want) {
			t.Fatalf("cl100k %q: %v, tiktoken %v", s, got, want)
		}
	})
}

func BenchmarkFastBPE(b *testing.B) {
	fe, err := fastEncoder(DefaultTokenizer)
	if err != nil {
		b.Fatal(err)
	}
	benchTokenizer(b, func(text string) {
		fe.mu.Lock()
		clear(fe.cache) // measure without the piece memo of earlier runs
		fe.mu.Unlock()
		fe.encode(nil, text)
	})
}
