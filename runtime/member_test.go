package runtime

import (
	"errors"
	"testing"
)

func TestParseCompletionIsStrict(t *testing.T) {
	cases := []struct {
		name, reply string
		ok          bool
	}{
		{"done", `{"status":"done","files":["double.go"]}`, true},
		{"failed", `{"status":"failed","error":"no write access"}`, true},
		{"surrounding whitespace", "\n {\"status\":\"done\",\"files\":[]} \n", true},
		{"prose before", `Sure! {"status":"done","files":[]}`, false},
		{"prose after", `{"status":"done","files":[]} hope this helps`, false},
		{"markdown fence", "```json\n{\"status\":\"done\",\"files\":[]}\n```", false},
		{"extra key", `{"status":"done","files":[],"confidence":0.9}`, false},
		{"unknown status", `{"status":"ok","files":[]}`, false},
		{"failed without error", `{"status":"failed"}`, false},
		{"done with error", `{"status":"done","error":"x"}`, false},
		{"two objects", `{"status":"done"}{"status":"done"}`, false},
		{"malformed", `{"status":"done",`, false},
		{"empty", ``, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseCompletion(c.reply)
			if c.ok && err != nil {
				t.Fatalf("rejected a valid reply: %v", err)
			}
			if !c.ok && !errors.Is(err, ErrMalformedReply) {
				t.Fatalf("accepted or misclassified %q: %v", c.reply, err)
			}
		})
	}
}

func TestTeamValidate(t *testing.T) {
	m := func(id, dir string) MemberSpec { return MemberSpec{ID: id, Dir: dir} }
	cases := []struct {
		name string
		team Team
		ok   bool
	}{
		{"valid", Team{RunID: "r", Members: []MemberSpec{m("a", "/x"), m("b", "/y")}}, true},
		{"no run id", Team{Members: []MemberSpec{m("a", "/x")}}, false},
		{"no members", Team{RunID: "r"}, false},
		{"duplicate member", Team{RunID: "r", Members: []MemberSpec{m("a", "/x"), m("a", "/y")}}, false},
		{"bad member id", Team{RunID: "r", Members: []MemberSpec{m("A B", "/x")}}, false},
		{"shared explicit session", Team{RunID: "r", Members: []MemberSpec{{ID: "a", Dir: "/x", SessionID: "s"}, {ID: "b", Dir: "/y", SessionID: "s"}}}, false},
		{"explicit session colliding with derived", Team{RunID: "r", Members: []MemberSpec{{ID: "a", Dir: "/x", SessionID: "r-b"}, m("b", "/y")}}, false},
		{"no directory", Team{RunID: "r", Members: []MemberSpec{m("a", "")}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.team.Validate(); (err == nil) != c.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, c.ok)
			}
		})
	}
}
