package oracle

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"sync"
)

// goDriverMemoSize bounds the Go driver binaries remembered in one process
// (each about 3 MB).
const goDriverMemoSize = 8

// goDriverMemo holds the Go driver binaries built in this process, by
// goDriverInputs. A matrix checks every implementing member's artifact, and
// the members of a case (and the cases of a matrix) often hand in the same
// bytes: building the driver again from byte-identical inputs with the same
// go tool gives the same binary (-trimpath, -buildvcs=false, CGO_ENABLED=0),
// so only the link is saved. The binary still runs once per Check, against
// that Check's own copy of the artifact, and its report is judged as always.
var goDriverMemo = &driverMemo{max: goDriverMemoSize, bins: map[string]memoDriver{}}

// goDriverInputs is the SHA-256 (hex) of everything the driver build reads
// that can differ between two checks: the go tool's identity (goToolKey), the
// whole environment of the build, the build flags, go.mod, main.go, the
// artifact's file name and bytes. It is "" (never remembered) when the go
// tool cannot be described.
func goDriverInputs(goBin string, env, flags []string, goMod, mainGo []byte, artifactFile string, artifact []byte) string {
	tool := goToolKey(goBin, env)
	if tool == "" {
		return ""
	}
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte(tool))
	sorted := slices.Clone(env)
	slices.Sort(sorted)
	for _, list := range [][]string{sorted, flags} {
		field([]byte(fmt.Sprint(len(list))))
		for _, v := range list {
			field([]byte(v))
		}
	}
	field(goMod)
	field(mainGo)
	field([]byte(artifactFile))
	field(artifact)
	return hex.EncodeToString(h.Sum(nil))
}

// driverMemo is a bounded map of built driver binaries, oldest evicted
// first. It is safe for concurrent use; two checks building the same inputs
// at once both build.
type driverMemo struct {
	mu    sync.Mutex
	max   int
	order []string
	bins  map[string]memoDriver
}

type memoDriver struct {
	binary []byte
	sha256 string
}

// reuse writes the binary remembered for inputs to binPath (mode 0755) and
// says so in buildLog, naming the inputs' and the binary's SHA-256. It reports false, writing nothing, when nothing is remembered for
// inputs; an error when a file cannot be written.
func (m *driverMemo) reuse(inputs, binPath, buildLog string) (bool, error) {
	if inputs == "" {
		return false, nil
	}
	m.mu.Lock()
	d, ok := m.bins[inputs]
	m.mu.Unlock()
	if !ok {
		return false, nil
	}
	if err := os.WriteFile(binPath, d.binary, 0o755); err != nil {
		return false, err
	}
	note := fmt.Sprintf("go build not run: this process built the driver earlier from byte-identical inputs "+
		"(go tool, environment, flags, go.mod, main.go, artifact: SHA-256 %s); that binary (SHA-256 %s) was written here\n", inputs, d.sha256)
	if err := os.WriteFile(buildLog, []byte(note), 0o600); err != nil {
		return false, err
	}
	return true, nil
}

// remember keeps the binary at binPath, just built from inputs. A binary
// that cannot be read is not remembered.
func (m *driverMemo) remember(inputs, binPath string) {
	if inputs == "" {
		return
	}
	data, err := os.ReadFile(binPath)
	if err != nil {
		return
	}
	sum := sha256.Sum256(data)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.bins[inputs]; ok {
		return
	}
	m.bins[inputs] = memoDriver{binary: data, sha256: hex.EncodeToString(sum[:])}
	m.order = append(m.order, inputs)
	for len(m.order) > m.max {
		delete(m.bins, m.order[0])
		m.order = m.order[1:]
	}
}
