package capture

import (
	"fmt"
	"slices"
	"sync"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// Tokenizers lists the encodings Options.Tokenizer accepts; all are embedded, so
// capture never touches the network.
var Tokenizers = []string{"o200k_base", "cl100k_base", "p50k_base", "r50k_base"}

var setLoader sync.Once

var encoders sync.Map // name → func() (*tiktoken.Tiktoken, error)

// encoder returns the cached tiktoken encoder for name. tiktoken-go rebuilds
// its BPE tables on every GetEncoding call, so each encoding is built once
// per process.
func encoder(name string) (*tiktoken.Tiktoken, error) {
	setLoader.Do(func() { tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader()) })
	f, _ := encoders.LoadOrStore(name, sync.OnceValues(func() (*tiktoken.Tiktoken, error) {
		return tiktoken.GetEncoding(name)
	}))
	enc, err := f.(func() (*tiktoken.Tiktoken, error))()
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", name, err)
	}
	return enc, nil
}

// validTokenizer reports whether name is one of Tokenizers.
func validTokenizer(name string) bool { return slices.Contains(Tokenizers, name) }

// CountTokens returns the number of tokens of text in the named encoding
// (ordinary text: special-token strings count as text), the same as
// tiktoken-go's EncodeOrdinary.
func CountTokens(encoding, text string) (int, error) {
	if fe, err := fastEncoder(encoding); fe != nil && err == nil {
		return len(fe.encode(nil, text)), nil
	}
	enc, err := encoder(encoding)
	if err != nil {
		return 0, err
	}
	return len(enc.EncodeOrdinary(text)), nil
}
