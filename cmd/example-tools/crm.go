package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolplane/toolplane/toolkit"
)

// Customer is one row of the in-memory CRM table.
type Customer struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Email string `json:"email"`
	Tier  string `json:"tier" tool:"enum=bronze|silver|gold"`
	City  string `json:"city"`
}

var customers = []Customer{
	{ID: "C-1001", Name: "Changlu", Email: "changlu@example.com", Tier: "gold", City: "北京"},
	{ID: "C-1002", Name: "Ada Lovelace", Email: "ada@example.com", Tier: "silver", City: "London"},
	{ID: "C-1003", Name: "Chang Wei", Email: "wei.chang@example.com", Tier: "bronze", City: "上海"},
	{ID: "C-1004", Name: "Grace Hopper", Email: "grace@example.com", Tier: "gold", City: "Arlington"},
	{ID: "C-1005", Name: "Li Na", Email: "li.na@example.com", Tier: "silver", City: "西安"},
}

// CustomerQuery is query_customer's input.
type CustomerQuery struct {
	Name  string `json:"name" description:"All or part of the customer's name, any case"`
	Limit int    `json:"limit,omitempty" tool:"minimum=1;maximum=100" default:"10" description:"At most this many customers are returned"`
}

// CustomerList is query_customer's output.
type CustomerList struct {
	Customers []Customer `json:"customers"`
	// Total counts every match, also those past the limit.
	Total int `json:"total"`
}

// findCustomers matches name case-insensitively anywhere in a customer's
// name, in table order.
func findCustomers(name string, limit int) CustomerList {
	needle := strings.ToLower(strings.TrimSpace(name))
	out := CustomerList{Customers: []Customer{}}
	for _, c := range customers {
		if !strings.Contains(strings.ToLower(c.Name), needle) {
			continue
		}
		out.Total++
		if len(out.Customers) < limit {
			out.Customers = append(out.Customers, c)
		}
	}
	return out
}

// queryCustomer is the query_customer tool.
func queryCustomer(_ context.Context, in CustomerQuery) (CustomerList, error) {
	limit := in.Limit
	if limit == 0 {
		limit = 10
	}
	if limit < 1 || limit > 100 {
		return CustomerList{}, fmt.Errorf("limit %d is outside 1..100", limit)
	}
	return findCustomers(in.Name, limit), nil
}

// Order is one row of the in-memory order table.
type Order struct {
	ID       string   `json:"id"`
	Customer string   `json:"customer"`
	Status   string   `json:"status" tool:"enum=created|paid|shipped"`
	Tags     []string `json:"tags"`
	Total    string   `json:"total" description:"Exact decimal amount, as a string"`
}

var orders = []Order{
	{ID: "O-5001", Customer: "C-1001", Status: "paid", Tags: []string{"priority", "gift"}, Total: "129.90"},
	{ID: "O-5002", Customer: "C-1002", Status: "created", Tags: []string{"backorder"}, Total: "15.00"},
	{ID: "O-5003", Customer: "C-1001", Status: "shipped", Tags: []string{"priority"}, Total: "2400.00"},
	{ID: "O-5004", Customer: "C-1004", Status: "paid", Tags: []string{}, Total: "8.25"},
	{ID: "O-5005", Customer: "C-1005", Status: "shipped", Tags: []string{"gift"}, Total: "560.40"},
	{ID: "O-5006", Customer: "C-1003", Status: "created", Tags: []string{"priority", "fragile"}, Total: "77.70"},
}

// OrderSearch is search_orders' input.
type OrderSearch struct {
	Status string   `json:"status" tool:"enum=created|paid|shipped"`
	Tags   []string `json:"tags,omitempty" description:"Only orders that carry every one of these tags"`
}

// OrderList is search_orders' output.
type OrderList struct {
	Orders []Order `json:"orders"`
}

// searchOrders is the search_orders tool: the orders with the status and
// every one of the tags.
func searchOrders(_ context.Context, in OrderSearch) (OrderList, error) {
	out := OrderList{Orders: []Order{}}
	for _, o := range orders {
		if o.Status != in.Status {
			continue
		}
		if !allTagged(o.Tags, in.Tags) {
			continue
		}
		out.Orders = append(out.Orders, o)
	}
	return out, nil
}

func allTagged(have, want []string) bool {
	for _, t := range want {
		if !slices.ContainsFunc(have, func(h string) bool { return strings.EqualFold(h, t) }) {
			return false
		}
	}
	return true
}

// TicketRequest is create_ticket's input.
type TicketRequest struct {
	Title    string `json:"title" tool:"minLength=1;maxLength=200"`
	Priority string `json:"priority" tool:"enum=low|medium|high"`
}

// Ticket is a created support ticket.
type Ticket struct {
	ID        string    `json:"id"`
	Title     string    `json:"title"`
	Priority  string    `json:"priority" tool:"enum=low|medium|high"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"createdAt"`
}

// maxTickets bounds the helpdesk's memory: a sample must not grow without
// end because an agent loops on create_ticket.
const maxTickets = 1000

// Helpdesk is a service value whose methods become tools by method
// scanning, as Agents-Flex's ToolScanner does.
type Helpdesk struct {
	mu      sync.Mutex
	next    int
	tickets []Ticket
	now     func() time.Time
}

// CreateTicket opens a support ticket and returns it with its id.
func (h *Helpdesk) CreateTicket(_ context.Context, in TicketRequest) (Ticket, error) {
	title := strings.TrimSpace(in.Title)
	if title == "" {
		return Ticket{}, fmt.Errorf("title must not be empty")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now
	if h.now != nil {
		now = h.now
	}
	h.next++
	t := Ticket{
		ID:        fmt.Sprintf("T-%05d", h.next),
		Title:     title,
		Priority:  in.Priority,
		Status:    "open",
		CreatedAt: now().UTC(),
	}
	if len(h.tickets) == maxTickets {
		h.tickets = slices.Delete(h.tickets, 0, 1)
	}
	h.tickets = append(h.tickets, t)
	return t, nil
}

// Tickets returns the tickets kept, oldest first.
func (h *Helpdesk) Tickets() []Ticket {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.tickets)
}

// DeleteRequest is delete_ticket's input.
type DeleteRequest struct {
	ID string `json:"id" description:"The ticket's id, as create_ticket returned it (T-00001)" tool:"minLength=1;maxLength=32"`
}

// Deleted is delete_ticket's output.
type Deleted struct {
	ID      string `json:"id"`
	Deleted bool   `json:"deleted" description:"Whether the ticket is gone: false when the user declined"`
	Reason  string `json:"reason,omitempty" description:"Why, as the user said when asked"`
}

// deleteQuestion is the form delete_ticket asks its user to fill in.
var deleteQuestion = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"reason": map[string]any{"type": "string", "title": "Reason", "description": "Why the ticket goes (optional)", "maxLength": 200},
	},
}

// deleteTicket is the delete_ticket tool: it asks the user to confirm
// before it deletes, with toolkit.Ask. Over MCP in the 2026-07-28 era the
// question is the call's result and the tool runs again with the answer,
// so it changes nothing before Ask.
func deleteTicket(h *Helpdesk) func(context.Context, DeleteRequest) (Deleted, error) {
	return func(ctx context.Context, in DeleteRequest) (Deleted, error) {
		out := Deleted{ID: in.ID}
		t, ok := h.ticket(in.ID)
		if !ok {
			return out, fmt.Errorf("no ticket %q", in.ID)
		}
		ans, err := toolkit.Ask(ctx, "confirm", toolkit.Question{
			Message: fmt.Sprintf("Delete ticket %s (%q)? It cannot be undone.", t.ID, t.Title),
			Schema:  deleteQuestion,
		})
		switch {
		case errors.Is(err, toolkit.ErrCannotAsk):
			return out, errors.New("delete_ticket asks its user to confirm, and this client cannot be asked: use an MCP client that supports elicitation")
		case err != nil:
			return out, err
		case !ans.Accepted():
			return out, nil
		}
		out.Reason, _ = ans.Content["reason"].(string)
		out.Deleted = h.delete(in.ID)
		return out, nil
	}
}

func (h *Helpdesk) ticket(id string) (Ticket, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := slices.IndexFunc(h.tickets, func(t Ticket) bool { return t.ID == id })
	if i < 0 {
		return Ticket{}, false
	}
	return h.tickets[i], true
}

func (h *Helpdesk) delete(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.tickets)
	h.tickets = slices.DeleteFunc(h.tickets, func(t Ticket) bool { return t.ID == id })
	return len(h.tickets) < n
}
