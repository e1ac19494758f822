// Package controllers holds warmer's two reconcilers: the node agent's and the
// ImageWarm status controller.
package controllers
