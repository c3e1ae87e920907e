package fixturebackend

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
)

// object is what the fixture stores: a typed object with its metadata.
type object interface {
	runtime.Object
	metav1.Object
}

// adminUser is the common name of an instance's admin certificate.
const adminUser = "fixture-admin"

// objectFor is a new object of each resource the fixture serves (all of the core group, v1).
var objectFor = map[string]func() object{
	"namespaces": func() object { return &corev1.Namespace{} },
	"configmaps": func() object { return &corev1.ConfigMap{} },
}

// apiServer is an instance's API: objects kept in memory by path, created with POST and read
// with GET, as a kube-apiserver does for the core group. Requests come in JSON or protobuf
// (client-go's choice); answers are JSON, which every client reads.
type apiServer struct {
	// clientCAs verify the client certificates: the instance's CA.
	clientCAs *x509.CertPool

	mu      sync.Mutex
	objects map[string]object
	revoked map[string]bool
	version int
}

func newAPIServer(ca *x509.Certificate) *apiServer {
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &apiServer{clientCAs: pool, objects: map[string]object{}, revoked: map[string]bool{}}
}

// tlsConfig asks for a client certificate but verifies it on every request (ServeHTTP), as
// kube-apiserver does: a certificate that expires while its connection is open stops working.
func (a *apiServer) tlsConfig(serving tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{serving}, ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12}
}

func (a *apiServer) revoke(user string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.revoked[user] = true
}

// put stores an object at path with the metadata an API server gives it.
func (a *apiServer) put(path, namespace string, obj object) {
	a.version++
	obj.SetName(path[strings.LastIndex(path, "/")+1:])
	obj.SetNamespace(namespace)
	obj.SetUID(types.UID(fmt.Sprintf("fixture-%d", a.version)))
	obj.SetResourceVersion(fmt.Sprint(a.version))
	obj.SetCreationTimestamp(metav1.Now())
	a.objects[path] = obj
}

func (a *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user, err := a.authenticate(r)
	if err != nil {
		a.fail(w, apierrors.NewUnauthorized(err.Error()))
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.revoked[user] {
		a.fail(w, apierrors.NewForbidden(schema.GroupResource{}, "", fmt.Errorf("user %q may not do this", user)))
		return
	}
	// /api/v1/<resource>[/<name>], or /api/v1/namespaces/<namespace>/<resource>[/<name>]: an
	// odd count of parts names a collection, an even one an object.
	rest, _ := strings.CutPrefix(r.URL.Path, "/api/v1/")
	parts := strings.Split(rest, "/")
	resourceAt := len(parts) - 1
	if len(parts)%2 == 0 {
		resourceAt--
	}
	resource := parts[resourceAt]
	newObject, served := objectFor[resource]
	if !strings.HasPrefix(r.URL.Path, "/api/v1/") || len(parts) > 4 || !served || (len(parts) > 2 && parts[0] != "namespaces") {
		a.fail(w, apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path))
		return
	}
	namespace := ""
	if len(parts) > 2 {
		namespace = parts[1]
		if _, ok := a.objects["/api/v1/namespaces/"+namespace]; !ok {
			a.fail(w, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, namespace))
			return
		}
	}
	switch {
	case r.Method == http.MethodGet && len(parts)%2 == 0:
		obj, ok := a.objects[r.URL.Path]
		if !ok {
			a.fail(w, apierrors.NewNotFound(schema.GroupResource{Resource: resource}, parts[len(parts)-1]))
			return
		}
		a.reply(w, http.StatusOK, obj)
	case r.Method == http.MethodPost && len(parts)%2 == 1:
		body, err := io.ReadAll(r.Body)
		if err != nil {
			a.fail(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		obj := newObject()
		if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, obj); err != nil {
			a.fail(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		if obj.GetName() == "" {
			a.fail(w, apierrors.NewBadRequest("metadata.name: required"))
			return
		}
		path := r.URL.Path + "/" + obj.GetName()
		if _, exists := a.objects[path]; exists {
			a.fail(w, apierrors.NewAlreadyExists(schema.GroupResource{Resource: resource}, obj.GetName()))
			return
		}
		a.put(path, namespace, obj)
		a.reply(w, http.StatusCreated, obj)
	default:
		a.fail(w, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: resource}, r.Method))
	}
}

// authenticate is the user of the request's client certificate, verified now against the
// instance's CA.
func (a *apiServer) authenticate(r *http.Request) (string, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return "", fmt.Errorf("no client certificate")
	}
	certs := r.TLS.PeerCertificates
	intermediates := x509.NewCertPool()
	for _, c := range certs[1:] {
		intermediates.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: a.clientCAs, Intermediates: intermediates, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return "", fmt.Errorf("client certificate: %v", err)
	}
	return certs[0].Subject.CommonName, nil
}

func (a *apiServer) fail(w http.ResponseWriter, err *apierrors.StatusError) {
	status := err.Status()
	a.reply(w, int(status.Code), &status)
}

// reply writes obj as JSON with its kind and apiVersion.
func (a *apiServer) reply(w http.ResponseWriter, code int, obj runtime.Object) {
	body, err := runtime.Encode(scheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion, metav1.SchemeGroupVersion), obj)
	if err != nil {
		code, body = http.StatusInternalServerError, []byte(err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}
