package jsonconv

import "testing"

// Evidence and Readable both rename Go field names and turn nanosecond durations into seconds;
// only Evidence turns an object keyed by data into a key/value list.
func TestEvidenceAndReadable(t *testing.T) {
	raw := []byte(`{"Duration":1500000000,"ExitCode":0,"votes":{"double.go":3,"other.go":1}}`)
	ev, err := Evidence(raw)
	if err != nil || string(ev) != `{"duration_seconds":1.5,"exit_code":0,"votes":[{"key":"double.go","value":3},{"key":"other.go","value":1}]}` {
		t.Fatalf("Evidence: %s %v", ev, err)
	}
	rd, err := Readable(raw)
	if err != nil || string(rd) != `{"duration_seconds":1.5,"exit_code":0,"votes":{"double.go":3,"other.go":1}}` {
		t.Fatalf("Readable: %s %v", rd, err)
	}
	if _, err := Readable([]byte(`{"a":`)); err == nil {
		t.Fatal("Readable of broken JSON: no error")
	}
}
