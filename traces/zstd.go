package traces

import (
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

// zstdMagic starts every zstd frame.
var zstdMagic = []byte{0x28, 0xB5, 0x2F, 0xFD}

// newZstdReader decompresses r as a stream. A frame cut short surfaces as
// io.ErrUnexpectedEOF from Read, which the line readers turn into
// ErrTruncated after returning the rows decoded so far.
func newZstdReader(r io.Reader) (io.ReadCloser, error) {
	dec, err := zstd.NewReader(r,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(64<<20))
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	return dec.IOReadCloser(), nil
}

// zstdWriter compresses into w; Close ends the frame and closes w if it is an
// io.Closer.
type zstdWriter struct {
	enc   *zstd.Encoder
	under io.Writer
}

func newZstdWriter(w io.Writer) (*zstdWriter, error) {
	enc, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	return &zstdWriter{enc: enc, under: w}, nil
}

func (z *zstdWriter) Write(p []byte) (int, error) { return z.enc.Write(p) }

// Flush ends the current zstd block so everything written so far can be
// decompressed by a reader.
func (z *zstdWriter) Flush() error { return z.enc.Flush() }

func (z *zstdWriter) Close() error {
	err := z.enc.Close()
	if c, ok := z.under.(io.Closer); ok {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
