package contracts

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/text/unicode/norm"

	"github.com/kaptinlin/jsonschema"
)

// formatOverrides replace validator format checks that are laxer than
// their RFCs, or add ones it lacks. The library's uri/uri-reference checks
// rest on Go's url.Parse, which accepts spaces and other characters RFC
// 3986 forbids ("invalid uri" passed as a uri-reference); each URI override
// keeps the library's check and adds the RFC 3986 character set (RFC 3987
// for iri) and where brackets and "@" may stand. hostname refuses a
// trailing dot and invalid punycode labels; idn-hostname and idn-email,
// which the library does not know, are checked with IDNA2008 (x/net/idna);
// ipv4 refuses signs; uri-template follows RFC 6570's grammar.
// Both the library path (registered per compiler) and the fast path use
// this table, so they cannot disagree.
var formatOverrides = map[string]func(any) bool{
	"uri":           onString(func(s string) bool { return uriChars(s, false) && uriShape(s) && jsonschema.IsURI(s) }),
	"iri":           onString(func(s string) bool { return uriChars(s, true) && uriShape(s) && jsonschema.IsURI(s) }),
	"uri-reference": onString(func(s string) bool { return uriChars(s, false) && uriShape(s) && jsonschema.IsURIReference(s) }),
	"iri-reference": onString(func(s string) bool { return uriChars(s, true) && uriShape(s) && jsonschema.IsURIReference(s) }),
	"hostname":      onString(func(s string) bool { return hostname(s, false) }),
	"idn-hostname":  onString(func(s string) bool { return hostname(s, true) }),
	"ipv4":          onString(func(s string) bool { return digitsAndDots(s) && jsonschema.IsIPV4(s) }),
	"idn-email":     onString(idnEmail),
	"uri-template":  onString(uriTemplate),
	// Sentinels of dialect.go: checks the validator lacks.
	fmtDraft4Integer: draft4Integer,
	fmtEmptyEnum:     func(any) bool { return false },
}

// onString makes a string check a format checker: a format applies to
// strings only, so any other value passes.
func onString(check func(string) bool) func(any) bool {
	return func(v any) bool {
		s, ok := v.(string)
		return !ok || check(s)
	}
}

// formatChecker is the checker for a format name, overrides first.
func formatChecker(name string) (func(any) bool, bool) {
	if f, ok := formatOverrides[name]; ok {
		return f, true
	}
	f, ok := jsonschema.Formats[name]
	return f, ok
}

// uriChars reports whether a string uses only characters a URI may hold:
// unreserved, reserved and percent-encoded octets (RFC 3986 §2), plus any
// non-ASCII character for IRIs.
func uriChars(s string, iri bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return false
			}
			i += 2
		case c < utf8.RuneSelf:
			switch c {
			case '-', '.', '_', '~', ':', '/', '?', '#', '[', ']', '@', '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=':
			default:
				return false
			}
		default:
			if !iri {
				return false
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError {
				return false
			}
			i += size - 1
		}
	}
	return true
}

// uriShape refuses what RFC 3986's grammar puts nowhere: square brackets
// outside an IP-literal host, and more than one "@" in the authority.
func uriShape(s string) bool {
	rest := s
	if i := strings.IndexAny(rest, ":/?#"); i > 0 && rest[i] == ':' {
		rest = rest[i+1:] // scheme
	}
	if after, ok := strings.CutPrefix(rest, "//"); ok {
		end := strings.IndexAny(after, "/?#")
		if end < 0 {
			end = len(after)
		}
		auth := after[:end]
		rest = after[end:]
		if strings.Count(auth, "@") > 1 {
			return false
		}
		host := auth[strings.LastIndexByte(auth, '@')+1:]
		if i := strings.IndexAny(host, "[]"); i >= 0 {
			j := strings.IndexByte(host, ']')
			if host[0] != '[' || j < 0 || strings.ContainsAny(host[1:j], "[]") || strings.ContainsAny(host[j+1:], "[]") {
				return false
			}
		}
		if strings.ContainsAny(auth[:strings.LastIndexByte(auth, '@')+1], "[]") {
			return false
		}
	}
	return !strings.ContainsAny(rest, "[]")
}

// hostname checks a host name (RFC 1123), or with idn an internationalized
// one (RFC 5890, IDNA2008). A trailing dot is refused (the suite's reading);
// "xn--" labels must be valid punycode of a valid U-label.
func hostname(s string, idn bool) bool {
	if idn {
		// RFC 3490 §3.1: these full stops separate labels too.
		s = idnDots.Replace(s)
	}
	if s == "" || strings.HasSuffix(s, ".") {
		return false
	}
	if idn {
		a, err := idna.Registration.ToASCII(s)
		if err != nil {
			return false
		}
		s = a
	}
	if !jsonschema.IsHostname(s) {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if len(label) >= 4 && strings.EqualFold(label[:4], "xn--") {
			u, err := idna.Registration.ToUnicode(label)
			if err != nil || !contextOK(u) {
				return false
			}
		}
	}
	return true
}

// contextOK applies the IDNA2008 rules x/net/idna leaves out: the
// CONTEXTO rules (RFC 5892 Appendix A) and the exceptions it disallows
// (RFC 5892 §2.6).
func contextOK(label string) bool {
	rs := []rune(label)
	has := func(ok func(r rune) bool) bool {
		for _, r := range rs {
			if ok(r) {
				return true
			}
		}
		return false
	}
	for i, r := range rs {
		switch {
		case r == 0x0640 || r == 0x07FA || r == 0x302E || r == 0x302F || (r >= 0x3031 && r <= 0x3035) || r == 0x303B:
			return false
		case r == 0x00B7: // MIDDLE DOT: only in l·l
			if i == 0 || i == len(rs)-1 || rs[i-1] != 'l' || rs[i+1] != 'l' {
				return false
			}
		case r == 0x0375: // GREEK KERAIA: before a Greek letter
			if i == len(rs)-1 || !unicode.Is(unicode.Greek, rs[i+1]) {
				return false
			}
		case r == 0x05F3 || r == 0x05F4: // HEBREW GERESH, GERSHAYIM: after a Hebrew letter
			if i == 0 || !unicode.Is(unicode.Hebrew, rs[i-1]) {
				return false
			}
		case r == 0x30FB: // KATAKANA MIDDLE DOT: with Hiragana, Katakana or Han
			if !has(func(c rune) bool {
				return c != 0x30FB && (unicode.Is(unicode.Hiragana, c) || unicode.Is(unicode.Katakana, c) || unicode.Is(unicode.Han, c))
			}) {
				return false
			}
		case r >= 0x0660 && r <= 0x0669: // Arabic-Indic digits: not with extended ones
			if has(func(c rune) bool { return c >= 0x06F0 && c <= 0x06F9 }) {
				return false
			}
		}
	}
	return true
}

// idnEmail checks an internationalized e-mail address (RFC 6531): a local
// part without ASCII specials or spaces, "@", an idn-hostname.
func idnEmail(s string) bool {
	at := strings.LastIndexByte(s, '@')
	if at <= 0 || !utf8.ValidString(s) {
		return false
	}
	local, domain := s[:at], norm.NFC.String(s[at+1:])
	if len(local) >= 2 && local[0] == '"' && local[len(local)-1] == '"' {
		// A quoted local part may hold anything but a bare quote or backslash.
		q := strings.ReplaceAll(strings.ReplaceAll(local[1:len(local)-1], `\\`, ""), `\"`, "")
		return !strings.ContainsAny(q, "\"\\") && hostname(domain, true)
	}
	if strings.ContainsAny(local, " \t\"(),:;<>@[\\]") || strings.HasPrefix(local, ".") ||
		strings.HasSuffix(local, ".") || strings.Contains(local, "..") {
		return false
	}
	if len(domain) > 2 && domain[0] == '[' && domain[len(domain)-1] == ']' {
		return jsonschema.IsEmail("a@" + domain)
	}
	return hostname(domain, true)
}

// uriTemplate checks RFC 6570 syntax (level 4): literals, and expressions
// of an optional operator and comma-separated varspecs (a dotted name of
// letters, digits, "_" and %XX, then ":1".."9999" or "*").
func uriTemplate(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 || !uriTemplateExpr(s[i+1:i+end]) {
				return false
			}
			i += end
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return false
			}
			i += 2
		case c < 0x21 || c == 0x7f || strings.IndexByte("\"<>\\^`|}", c) >= 0:
			return false
		}
	}
	return utf8.ValidString(s)
}

func uriTemplateExpr(e string) bool {
	if e != "" && strings.IndexByte("+#./;?&", e[0]) >= 0 {
		e = e[1:]
	}
	for _, spec := range strings.Split(e, ",") {
		name, mod := spec, ""
		if i := strings.IndexAny(spec, ":*"); i >= 0 {
			name, mod = spec[:i], spec[i:]
		}
		if !uriTemplateName(name) {
			return false
		}
		switch {
		case mod == "" || mod == "*":
		case len(mod) >= 2 && len(mod) <= 5 && mod[0] == ':' && mod[1] >= '1' && mod[1] <= '9' &&
			strings.Trim(mod[2:], "0123456789") == "":
		default:
			return false
		}
	}
	return true
}

func uriTemplateName(n string) bool {
	if n == "" || n[0] == '.' || n[len(n)-1] == '.' || strings.Contains(n, "..") {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.':
		case c == '%' && i+2 < len(n) && isHex(n[i+1]) && isHex(n[i+2]):
			i += 2
		default:
			return false
		}
	}
	return true
}

var idnDots = strings.NewReplacer("\u3002", ".", "\uff0e", ".", "\uff61", ".")

func digitsAndDots(s string) bool {
	return strings.Trim(s, "0123456789.") == ""
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
