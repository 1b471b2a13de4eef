// Package reboundkratos puts rebound behind kratos' service registry
// interfaces (github.com/go-kratos/kratos/v2/registry).
package reboundkratos
