package defense

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// Bounds on sshd's configuration. sshd itself allows 16 levels of Include.
const (
	maxConfigSize   = 1 << 20
	maxConfigLine   = 16 << 10
	maxConfigFiles  = 256
	maxConfigReads  = 1024     // parses, counting a file included twice twice
	maxConfigParsed = 16 << 20 // bytes parsed in all, for the same reason
	maxIncludeDepth = 16
	maxProblems     = 8
	maxConfigArgs   = 256
)

// The settings read, by sshd's keyword in lower case.
const (
	kwPassword = "passwordauthentication"
	kwRoot     = "permitrootlogin"
	kwKbd      = "kbdinteractiveauthentication"
	kwPAM      = "usepam"
)

// sshdDefaults are sshd's compiled-in values (OpenSSH 7.0 and later) for
// settings no file sets. Debian and Ubuntu's shipped file sets UsePAM yes.
var sshdDefaults = map[string]string{
	kwPassword: "yes",
	kwRoot:     "prohibit-password",
	kwKbd:      "yes",
	kwPAM:      "no",
}

// sshdValues are the values sshd accepts for each setting (compared
// without case) and what they mean: without-password is the old name of
// prohibit-password.
var sshdValues = map[string]map[string]string{
	kwPassword: {"yes": "yes", "no": "no"},
	kwKbd:      {"yes": "yes", "no": "no"},
	kwPAM:      {"yes": "yes", "no": "no"},
	kwRoot: {
		"yes": "yes", "no": "no", "prohibit-password": "prohibit-password",
		"without-password": "prohibit-password", "forced-commands-only": "forced-commands-only",
	},
}

// sshdAliases maps keywords to the setting they set.
// ChallengeResponseAuthentication is KbdInteractiveAuthentication's old
// name (an alias since OpenSSH 8.7); before 8.7 keyboard-interactive logins
// needed both, and distributions set both the same way.
var sshdAliases = map[string]string{
	kwPassword:                        kwPassword,
	kwRoot:                            kwRoot,
	kwKbd:                             kwKbd,
	"challengeresponseauthentication": kwKbd,
	kwPAM:                             kwPAM,
}

// ReadSSHD reads sshd's effective authentication settings from its main
// config file at name and the files it includes, in fsys: the host's root
// (os.DirFS("/")) for an absolute name, as sshd is configured; a relative
// name (a fixture's) is read relative to fsys's root, and so are relative
// Include paths then. It follows sshd_config(5) and sshd's own parser
// (servconf.c), and agrees with `sshd -T` on the cases in its tests:
//
//   - keywords are case-insensitive; "Keyword value" and "Keyword=value";
//     '#' starts a comment at the start of a line or of an argument;
//     arguments may be quoted.
//   - the first value obtained for a keyword wins, so a drop-in that
//     "Include /etc/ssh/sshd_config.d/*.conf" reads at the top of the main
//     file overrides the main file's later lines.
//   - Include takes globs, sorted as glob(3) sorts them; a relative path is
//     relative to the main file's directory (sshd's /etc/ssh). Included
//     files start in the scope of the Include line, and the includer's
//     scope is restored after each.
//   - a Match block lasts until the next Match line or the end of its file;
//     its settings apply to some connections only, so they do not change
//     the values reported (HasMatchBlocks says there are some). "Match all"
//     returns to the global scope, except in a file included from within a
//     Match block, which sshd reads for syntax only.
//
// A missing or unreadable main file is the error. Problems with included
// files and lines sshd would refuse (a bad value, say: sshd then refuses
// to start or reload) are returned as problems, at most a few, each naming
// its file and line; the values reported then ignore those lines.
func ReadSSHD(fsys fs.FS, name string) (*gridcityv1.SSHConfig, []string, error) {
	name = path.Clean(name)
	r := &sshdReader{
		fsys:  fsys,
		dir:   path.Dir(name),
		set:   map[string]sshdSetting{},
		cache: map[string]*sshdFile{},
	}
	f := r.load(name)
	if f.err != nil {
		switch {
		case errors.Is(f.err, fs.ErrNotExist):
			return nil, nil, fmt.Errorf("%s not found: is the OpenSSH server installed?", name)
		case errors.Is(f.err, fs.ErrPermission):
			return nil, nil, fmt.Errorf("permission denied reading %s", name)
		}
		return nil, nil, fmt.Errorf("read %s: %w", name, f.err)
	}
	if f.isDir {
		return nil, nil, fmt.Errorf("read %s: is a directory", name)
	}
	active := true
	r.parse(f, 0, &active, false)

	c := &gridcityv1.SSHConfig{HasMatchBlocks: r.hasMatch, Files: r.files}
	value := func(kw string) (string, string) {
		if s, ok := r.set[kw]; ok {
			return s.value, s.from
		}
		return sshdDefaults[kw], "default"
	}
	c.PasswordAuthentication, c.PasswordAuthenticationFrom = value(kwPassword)
	c.PermitRootLogin, c.PermitRootLoginFrom = value(kwRoot)
	c.KbdInteractiveAuthentication, c.KbdInteractiveAuthenticationFrom = value(kwKbd)
	c.UsePam, _ = value(kwPAM)
	problems := r.problems
	if r.moreProblems > 0 {
		problems = append(problems, fmt.Sprintf("and %d more problems", r.moreProblems))
	}
	return c, problems, nil
}

type sshdSetting struct{ value, from string }

// sshdFile is a config file as read, kept so that a file included twice is
// read once.
type sshdFile struct {
	name  string
	data  []byte
	err   error
	isDir bool
}

// errTooManyFiles stops reading includes past maxConfigFiles.
var errTooManyFiles = fmt.Errorf("more than %d config files", maxConfigFiles)

type sshdReader struct {
	fsys         fs.FS
	dir          string
	set          map[string]sshdSetting
	cache        map[string]*sshdFile
	files        []string
	reads        int
	parsed       int
	tooMuch      bool
	hasMatch     bool
	problems     []string
	moreProblems int
}

func (r *sshdReader) problem(format string, args ...any) {
	p := fmt.Sprintf(format, args...)
	switch {
	case slices.Contains(r.problems, p):
		// A file included twice has its problems twice.
	case len(r.problems) >= maxProblems:
		r.moreProblems++
	default:
		r.problems = append(r.problems, p)
	}
}

// load reads a file once, at most maxConfigSize of it. A directory (which
// an Include glob may match) reads as empty, as it does for sshd.
func (r *sshdReader) load(name string) *sshdFile {
	if f, ok := r.cache[name]; ok {
		return f
	}
	f := &sshdFile{name: name}
	if len(r.cache) >= maxConfigFiles {
		f.err = errTooManyFiles
		return f
	}
	r.cache[name] = f
	rel := strings.TrimPrefix(name, "/")
	info, err := fs.Stat(r.fsys, rel)
	if err != nil {
		f.err = err
		return f
	}
	if info.IsDir() {
		f.isDir = true
		return f
	}
	if !info.Mode().IsRegular() {
		// Opening a FIFO would block.
		f.err = errors.New("not a regular file")
		return f
	}
	file, err := r.fsys.Open(rel)
	if err != nil {
		f.err = err
		return f
	}
	defer file.Close()
	f.data, f.err = io.ReadAll(io.LimitReader(file, maxConfigSize+1))
	if len(f.data) > maxConfigSize {
		r.problem("%s is larger than %d MiB; only its start was read", name, maxConfigSize>>20)
		f.data = f.data[:bytes.LastIndexByte(f.data[:maxConfigSize], '\n')+1]
	}
	r.files = append(r.files, name)
	return f
}

// parse reads the lines of one file. active is the scope: true in the
// global section, false in a Match block. neverMatch is set for a file
// included from within a Match block, where sshd checks syntax only.
func (r *sshdReader) parse(f *sshdFile, depth int, active *bool, neverMatch bool) {
	r.reads++
	r.parsed += len(f.data)
	if r.reads > maxConfigReads || r.parsed > maxConfigParsed {
		if !r.tooMuch {
			r.tooMuch = true
			r.problem("%s: more included than sshd_config can sensibly hold (%d files, %d MiB); the rest was not read", f.name, r.reads, r.parsed>>20)
		}
		return
	}
	num := 0
	for line := range bytes.SplitSeq(f.data, []byte("\n")) {
		num++
		if len(line) > maxConfigLine {
			r.problem("%s:%d: line longer than %d KiB not read", f.name, num, maxConfigLine>>10)
			continue
		}
		r.line(string(line), f.name, num, depth, active, neverMatch)
	}
}

const sshWhitespace = " \t\r\n"

func (r *sshdReader) line(line, file string, num, depth int, active *bool, neverMatch bool) {
	line = strings.TrimLeft(line, " \t\r")
	line = strings.TrimRight(line, sshWhitespace+"\f")
	keyword, rest, ok := sshKeyword(line)
	if ok && keyword == "" {
		keyword, rest, ok = sshKeyword(rest)
	}
	if !ok || keyword == "" || keyword[0] == '#' {
		return
	}
	at := file + ":" + strconv.Itoa(num)
	if rest == "" {
		r.problem("%s: no argument after %s", at, clip(keyword))
		return
	}
	args, ok := sshArgs(rest)
	if !ok {
		r.problem("%s: unbalanced quotes", at)
		return
	}
	kw := strings.ToLower(keyword)
	switch kw {
	case "match":
		r.match(args, at, active, neverMatch)
	case "include":
		r.include(args, at, depth, active)
	default:
		setting, ok := sshdAliases[kw]
		if !ok {
			return
		}
		if setting == kwPAM && !*active {
			r.problem("%s: UsePAM is not allowed within a Match block; sshd refuses this line", at)
			return
		}
		if len(args) != 1 {
			r.problem("%s: %s takes one argument; sshd refuses this line", at, clip(keyword))
			return
		}
		value, ok := sshdValues[setting][strings.ToLower(args[0])]
		if !ok {
			r.problem("%s: %s: unsupported value %q; sshd refuses this line", at, clip(keyword), clip(args[0]))
			return
		}
		if _, seen := r.set[setting]; *active && !seen {
			r.set[setting] = sshdSetting{value: value, from: at}
		}
	}
}

// match starts a Match block. With no connection to match against (as sshd
// reads its config at start), every criterion but "all" fails.
func (r *sshdReader) match(args []string, at string, active *bool, neverMatch bool) {
	if len(args) == 0 {
		r.problem("%s: Match without criteria; sshd refuses this line", at)
		return
	}
	if strings.EqualFold(args[0], "all") {
		if len(args) > 1 {
			r.problem("%s: 'all' cannot be combined with other Match criteria; sshd refuses this line", at)
			return
		}
		*active = !neverMatch
		return
	}
	r.hasMatch = true
	*active = false
}

func (r *sshdReader) include(args []string, at string, depth int, active *bool) {
	if len(args) == 0 {
		r.problem("%s: Include without a file", at)
		return
	}
	if depth+1 > maxIncludeDepth {
		r.problem("%s: Include nested deeper than %d levels; sshd refuses this config", at, maxIncludeDepth)
		return
	}
	outer := *active
	for _, pattern := range args {
		if !strings.HasPrefix(pattern, "/") && !strings.HasPrefix(pattern, "~") {
			pattern = r.dir + "/" + pattern
		}
		for _, name := range r.glob(pattern, at) {
			f := r.load(name)
			if errors.Is(f.err, errTooManyFiles) {
				r.problem("%s: more than %d config files; the rest were not read", at, maxConfigFiles)
				return
			}
			if f.err != nil {
				r.problem("%s: cannot read %s: %s; sshd refuses to start without it", at, clip(name), errText(f.err))
				continue
			}
			r.parse(f, depth+1, active, !outer)
			*active = outer
		}
	}
}

// glob expands an Include pattern the way glob(3) does for sshd: matches
// sorted, '*' and '?' not matching a leading dot, "[!...]" for a negated
// class; a pattern glob cannot parse matches only itself.
func (r *sshdReader) glob(pattern, at string) []string {
	if strings.HasPrefix(pattern, "~") {
		// glob without GLOB_TILDE looks for a directory named "~".
		return nil
	}
	pattern = path.Clean(pattern)
	rooted := strings.HasPrefix(pattern, "/")
	rel := strings.TrimPrefix(pattern, "/")
	if rel == "" || rel == "." {
		return nil
	}
	goPattern := strings.ReplaceAll(rel, "[!", "[^")
	matches, err := fs.Glob(r.fsys, goPattern)
	if err != nil {
		if _, err := fs.Stat(r.fsys, rel); err == nil {
			return []string{pattern}
		}
		return nil
	}
	patParts := strings.Split(rel, "/")
	var out []string
	for _, m := range matches {
		if hiddenMatch(patParts, strings.Split(m, "/")) {
			continue
		}
		if len(out) >= maxConfigFiles {
			r.problem("%s: Include matches more than %d files; the rest were not read", at, maxConfigFiles)
			break
		}
		if rooted {
			m = "/" + m
		}
		out = append(out, m)
	}
	return out
}

// hiddenMatch reports whether a wildcard matched a name starting with a
// dot, which glob(3) does not allow unless the pattern has the dot.
func hiddenMatch(pattern, name []string) bool {
	for i := range min(len(pattern), len(name)) {
		if strings.HasPrefix(name[i], ".") && !strings.HasPrefix(pattern[i], ".") {
			return true
		}
	}
	return false
}

// sshKeyword splits off a line's first word as sshd's strdelim does: the
// keyword ends at a blank, a double quote or '='; a quoted keyword runs to
// the closing quote; one '=' between keyword and value is skipped, with
// the blanks around it. ok is false for an unterminated quote.
func sshKeyword(line string) (keyword, rest string, ok bool) {
	i := strings.IndexAny(line, sshWhitespace+`"=`)
	if i < 0 {
		return line, "", true
	}
	if line[i] == '"' {
		j := strings.IndexByte(line[i+1:], '"')
		if j < 0 {
			return "", "", false
		}
		keyword = line[:i] + line[i+1:i+1+j]
		return keyword, strings.TrimLeft(line[i+1+j+1:], sshWhitespace), true
	}
	equals := line[i] == '='
	keyword, rest = line[:i], strings.TrimLeft(line[i+1:], sshWhitespace)
	if !equals && strings.HasPrefix(rest, "=") {
		rest = strings.TrimLeft(rest[1:], sshWhitespace)
	}
	return keyword, rest, true
}

// sshArgs splits a keyword's arguments as sshd's argv_split does: blanks
// separate them, single or double quotes group, a backslash escapes a
// quote, a backslash or (outside quotes) a space, and '#' at the start of
// an argument ends the line.
func sshArgs(s string) ([]string, bool) {
	var args []string
	for i := 0; i < len(s) && len(args) < maxConfigArgs; i++ {
		if s[i] == ' ' || s[i] == '\t' {
			continue
		}
		if s[i] == '#' {
			break
		}
		var arg []byte
		var quote byte
	token:
		for ; i < len(s); i++ {
			c := s[i]
			switch {
			case c == '\\' && i+1 < len(s) && (s[i+1] == '\'' || s[i+1] == '"' || s[i+1] == '\\' || quote == 0 && s[i+1] == ' '):
				i++
				arg = append(arg, s[i])
			case quote == 0 && (c == ' ' || c == '\t'):
				break token
			case quote == 0 && (c == '"' || c == '\''):
				quote = c
			case quote != 0 && c == quote:
				quote = 0
			default:
				arg = append(arg, c)
			}
		}
		if quote != 0 {
			return nil, false
		}
		args = append(args, string(arg))
	}
	return args, true
}

// clip shortens text from a config file for a problem's message.
func clip(s string) string {
	if len(s) > 64 {
		return strings.ToValidUTF8(s[:64], "") + "…"
	}
	return s
}

func errText(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "no such file"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
