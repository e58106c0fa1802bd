package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// yamlBlock is a ```yaml block of a page and the HTML comment just above
// it, if any.
var yamlBlock = regexp.MustCompile("(?s)(?:<!-- ([^ :]+)[^\n]*-->\n)?```yaml\n(.*?)```")

// startsConfig matches a block that is a whole coordinator config: its first
// line is a top-level key.
var startsConfig = regexp.MustCompile(`^(districts|resources|links|probes|runbooks|collect|metrics|notify):`)

// TestDocsExamples holds the docs to the config: a block marked with a
// testdata file is that file, byte for byte (TestContract and the notify
// tests load them), and every other block that is a whole config parses.
func TestDocsExamples(t *testing.T) {
	marked := 0
	for _, page := range []string{"docs/configuration.md", "docs/notifications.md", "README.md"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", page))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range yamlBlock.FindAllStringSubmatch(string(b), -1) {
			file, block := m[1], m[2]
			if f, ok := strings.CutPrefix(file, "coordinator/internal/config/"); ok {
				marked++
				want, err := os.ReadFile(f)
				if err != nil {
					t.Fatalf("%s names %s: %v", page, file, err)
				}
				if block != string(want) {
					t.Errorf("%s: the example marked %s differs from that file; copy the file into the page", page, file)
				}
				continue
			}
			if !startsConfig.MatchString(block) {
				continue // a part of a config, an agent's config, or no config
			}
			if _, err := Parse(strings.NewReader(block), page); err != nil {
				t.Errorf("%s: an example does not parse:\n%v\n%s", page, err, block)
			}
		}
	}
	if marked != 2 {
		t.Errorf("docs/configuration.md shows %d of the examples in testdata/contract.yaml and notify.yaml; want both", marked)
	}
}
