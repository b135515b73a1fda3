package formation

import (
	"strings"
	"testing"

	"github.com/assay-audit/assay/runtime/provider/reference"
)

func TestConsensusAgreesOnKeysInTheFirstRound(t *testing.T) {
	e, sink, _ := setup(t)
	res := mustRun(t, e, build(t, "consensus", writer("a"), writer("b")), Options{})
	if !res.Success || res.Metadata["consensus_achieved"] != "true" || res.Metadata["rounds"] != "1" ||
		res.Metadata["consensus_key"] != "double/go/double.go,double_test.go" || res.Metadata["agreeing_members"] != "a,b" {
		t.Fatalf("%+v", res)
	}
	rounds := sink.ofType("consensus_round")
	if len(rounds) != 1 || payload(t, rounds[0])["agreement"] != true {
		t.Fatalf("rounds %v", rounds)
	}
}

func TestConsensusRules(t *testing.T) {
	other := `{"consensus_key":"other","proposal":"something else"}`
	cases := []struct {
		name      string
		members   []string
		faults    []reference.Fault
		opts      ConsensusOptions
		supervise bool
		wantOK    bool
		achieved  string
		rounds    string
		check     func(t *testing.T, meta map[string]string)
	}{
		{name: "disagreement for every round fails", members: []string{"a", "b"}, faults: []reference.Fault{replace("b", -1, other)},
			wantOK: false, achieved: "false", rounds: "3"},
		{name: "rounds option bounds the rounds", members: []string{"a", "b"}, faults: []reference.Fault{replace("b", -1, other)},
			opts: ConsensusOptions{Rounds: 2}, wantOK: false, achieved: "false", rounds: "2"},
		{name: "agreement in round two", members: []string{"a", "b"}, faults: []reference.Fault{replace("b", 0, other)},
			wantOK: true, achieved: "true", rounds: "2"},
		{name: "supervisor breaks the tie without claiming consensus", members: []string{"a", "b"}, faults: []reference.Fault{replace("b", -1, other)},
			supervise: true, wantOK: true, achieved: "false", rounds: "3",
			check: func(t *testing.T, meta map[string]string) {
				if meta["tie_breaker"] != "sup" || meta["decision"] == "" {
					t.Fatalf("tie-break not recorded: %v", meta)
				}
			}},
		{name: "a failed member counts in the denominator", members: []string{"a", "b", "c"},
			faults: []reference.Fault{{Member: "c", Turn: -1, Kind: reference.FaultHTTP500}}, wantOK: false, achieved: "false", rounds: "3"},
		{name: "a lower threshold accepts two of three", members: []string{"a", "b", "c"},
			faults: []reference.Fault{{Member: "c", Turn: -1, Kind: reference.FaultHTTP500}}, opts: ConsensusOptions{Threshold: 0.6},
			wantOK: true, achieved: "true", rounds: "1"},
		{name: "without keys, identical complete replies agree", members: []string{"a", "b"},
			faults: []reference.Fault{replace("a", -1, `{"consensus_key":"","proposal":"p"}`), replace("b", -1, `{"consensus_key":"","proposal":"p"}`)},
			wantOK: true, achieved: "true", rounds: "1"},
		{name: "without keys, different replies do not agree", members: []string{"a", "b"},
			faults: []reference.Fault{replace("a", -1, `{"consensus_key":"","proposal":"p"}`), replace("b", -1, `{"consensus_key":"","proposal":"q"}`)},
			wantOK: false, achieved: "false", rounds: "3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, _, _ := setup(t, c.faults...)
			tm := build(t, "consensus")
			for _, id := range c.members {
				tm.Members = append(tm.Members, build(t, "consensus", talker(id)).Members...)
			}
			if c.supervise {
				tm.Members = append(tm.Members, build(t, "consensus", withRoleSpec("sup", RoleSupervisor)).Members...)
			}
			res := mustRun(t, e, tm, Options{Consensus: c.opts})
			if res.Success != c.wantOK || res.Metadata["consensus_achieved"] != c.achieved || res.Metadata["rounds"] != c.rounds {
				t.Fatalf("success %v meta %v (want %v, achieved %s, rounds %s)", res.Success, res.Metadata, c.wantOK, c.achieved, c.rounds)
			}
			if c.check != nil {
				c.check(t, res.Metadata)
			}
		})
	}
}

func TestConsensusContractViolationsAndConfiguration(t *testing.T) {
	for name, reply := range map[string]string{
		"empty proposal":    `{"consensus_key":"k","proposal":""}`,
		"missing key field": `{"proposal":"p"}`,
		"extra key":         `{"consensus_key":"k","proposal":"p","confidence":1}`,
		"prose":             `I propose {"consensus_key":"k","proposal":"p"}`,
	} {
		t.Run(name, func(t *testing.T) {
			e, sink, _ := setup(t, replace("b", 0, reply))
			res := mustRun(t, e, build(t, "consensus", talker("a"), talker("b")), Options{})
			wantViolation(t, sink, res, "b", "")
		})
	}
	e, sink, _ := setup(t)
	wantConfigError(t, e, sink, build(t, "consensus", talker("a")), Options{}, "at least two proposers")
	wantConfigError(t, e, sink, build(t, "consensus", talker("a"), talker("b"), withRoleSpec("c", RoleCritic)), Options{}, "only supervisor")
	wantConfigError(t, e, sink, build(t, "consensus", talker("a"), talker("b")), Options{Consensus: ConsensusOptions{Threshold: 1.5}}, "threshold")
	// At or below one half, two disagreeing halves would both reach the threshold (issue 22, 7).
	for _, th := range []float64{0.5, 0.3} {
		wantConfigError(t, e, sink, build(t, "consensus", talker("a"), talker("b")), Options{Consensus: ConsensusOptions{Threshold: th}}, "at most 0.5")
	}
	if !strings.Contains(consensus.Doc, "0.7") {
		t.Fatal("the documented default threshold drifted")
	}
}
