package main

import (
	"fmt"
	"strings"

	"github.com/tokentrace/tokentrace/capture"
	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
)

func composeCommand() *cli.Command {
	var (
		o   = capture.DefaultComposeOptions()
		out string
		rf  readFlags
	)
	return &cli.Command{
		Name:  "compose",
		Usage: "finish a trace captured in parts (capture --part): k-anonymity, sessions and arrivals over all the parts",
		UsageText: `tokentrace compose [flags] PART...

Examples:
  tokentrace compose --out trace.parquet parts/            (a directory of capture parts)
  tokentrace compose --out trace.parquet 'parts/trace-part-*.parquet'`,
		Description: `compose reads the parts that "capture --part N" wrote (one per input shard,
e.g. one per pod of the capture Job) as one stream merged by arrival, and
writes the finished trace: categories and prefix blocks shared by fewer than k
requests over all the parts are dropped, sessions (keyed digests, the same in
every part) are split where idle for longer than the parts' --session-idle,
single-request sessions dropped and turns numbered, and arrivals counted from
the first request. Until then a part is refused by replay, synth and analyze.
Bad rows of the parts are skipped and named on stderr (--strict fails on the
first); a part out of arrival order is an error.`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "output trace (.parquet, .jsonl, .jsonl.zst, .csv)", Required: true, Destination: &out},
			&cli.IntFlag{Name: "min-category-size", Usage: "k (0 = the k the parts were captured with; smaller is refused)", Destination: &o.MinCategorySize},
			&cli.DurationFlag{Name: "session-idle", Usage: "split a session where idle for longer (0 = the parts' --session-idle)", Destination: &o.SessionIdle},
			&cli.BoolFlag{Name: "keep-hashes", Usage: "keep keyed digests as category and block ids instead of numbering them", Destination: &o.KeepHashes},
		}, rf.flags()...),
		Action: func(c *cli.Context) error {
			names, err := args(c, 1, -1, "capture parts: files, directories or glob patterns")
			if err != nil {
				return err
			}
			command := "tokentrace compose " + strings.Join(c.Args().Slice(), " ")
			o.Read = rf.options(c)
			st, err := capture.Compose(c.Context, o, names, command, func(m traces.Meta) (traces.Writer, error) {
				return traces.Create(out, m)
			})
			for _, n := range st.Notes {
				fmt.Fprintf(stdio(c).err, "tokentrace compose: warning: %s\n", n)
			}
			if err != nil {
				return flagged(err, captureFlags)
			}
			fmt.Fprintf(stdio(c).err, "compose: %d requests from %d parts; k %d: %d categories kept, %d dropped; %d prefix blocks kept, %d dropped; %d sessions (idle %v)\n",
				st.Requests, st.Parts, st.K, st.Categories, st.CategoriesDropped, st.BlocksKept, st.BlocksDropped, st.Sessions, st.SessionIdle)
			return nil
		},
	}
}
