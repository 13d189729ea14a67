// Command tokens is the token service of the tests' OCI registry, the way hosted registries
// (ghcr.io, Docker Hub) authenticate: the registry answers 401 with a Bearer challenge
// naming this service; a client trades its basic-auth credentials here for a short-lived
// ES256 JWT granting what it asked for, which the registry verifies against the key set
// this service writes at start. Tests only.
//
// Usage: tokens -jwks FILE -user USER (the password in $TOKENS_PASSWORD) [-anonymous]; it
// prints the URL it listens on, then serves GET /token until killed. With -anonymous, a
// request without credentials gets a token too, granting pull only (a public registry).
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

const keyID = "gitopsd-tests"

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	jwks := flag.String("jwks", "", "file to write the public key set to")
	issuer := flag.String("issuer", "gitopsd-tests", "the tokens' issuer")
	user := flag.String("user", "", "the one user; its password is $TOKENS_PASSWORD")
	anonymous := flag.Bool("anonymous", false, "grant pull without credentials")
	flag.Parse()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	if err := writeKeySet(*jwks, &key.PublicKey); err != nil {
		log.Fatal(err)
	}
	listener, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("http://%s/token\n", listener.Addr())
	os.Stdout.Sync()
	service := &tokens{
		key: key, issuer: *issuer, user: *user, password: os.Getenv("TOKENS_PASSWORD"),
		anonymous: *anonymous,
	}
	log.Fatal(http.Serve(listener, service))
}

func writeKeySet(path string, public *ecdsa.PublicKey) error {
	point, err := public.Bytes() // 0x04 || X || Y, 32 bytes each on P-256
	if err != nil {
		return err
	}
	set := map[string]any{"keys": []map[string]string{{
		"kty": "EC", "crv": "P-256", "kid": keyID, "alg": "ES256", "use": "sig",
		"x": encode(point[1:33]), "y": encode(point[33:65]),
	}}}
	data, err := json.Marshal(set)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

type tokens struct {
	key          *ecdsa.PrivateKey
	issuer, user string
	password     string
	anonymous    bool
}

func (t *tokens) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user, password, given := r.BasicAuth()
	if r.URL.Path != "/token" {
		http.NotFound(w, r)
		return
	}
	pullOnly := !given && t.anonymous
	if !pullOnly && (!given || !same(user, t.user) || !same(password, t.password)) {
		w.Header().Set("WWW-Authenticate", `Basic realm="tokens"`)
		http.Error(w, "credentials required", http.StatusUnauthorized)
		return
	}
	now := time.Now().Unix()
	claims := map[string]any{
		"iss": t.issuer, "sub": user, "aud": r.URL.Query().Get("service"),
		"iat": now, "nbf": now - 10, "exp": now + 300, "jti": randomID(),
		"access": access(r.URL.Query()["scope"], pullOnly),
	}
	token, err := t.sign(claims)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"token": token, "expires_in": 300})
}

// access grants every scope asked for ("repository:NAME:pull,push"), or only pull.
func access(scopes []string, pullOnly bool) []map[string]any {
	granted := []map[string]any{}
	for _, scope := range scopes {
		parts := strings.Split(scope, ":")
		if len(parts) != 3 {
			continue
		}
		actions := strings.Split(parts[2], ",")
		if pullOnly {
			actions = []string{"pull"}
		}
		granted = append(granted, map[string]any{
			"type": parts[0], "name": parts[1], "actions": actions,
		})
	}
	return granted
}

func (t *tokens) sign(claims map[string]any) (string, error) {
	header, err := json.Marshal(map[string]string{"alg": "ES256", "typ": "JWT", "kid": keyID})
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signed := encode(header) + "." + encode(payload)
	digest := sha256.Sum256([]byte(signed))
	r, s, err := ecdsa.Sign(rand.Reader, t.key, digest[:])
	if err != nil {
		return "", err
	}
	signature := make([]byte, 64)
	r.FillBytes(signature[:32])
	s.FillBytes(signature[32:])
	return signed + "." + encode(signature), nil
}

func same(given, wanted string) bool {
	return subtle.ConstantTimeCompare([]byte(given), []byte(wanted)) == 1
}

func encode(data []byte) string {
	return base64.RawURLEncoding.EncodeToString(data)
}

func randomID() string {
	id := make([]byte, 16)
	rand.Read(id)
	return hex.EncodeToString(id)
}
