// The REST client: every call goes through Weft's own routes with the operator's token.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export class Api {
  constructor(token, project) {
    this.token = token || null;
    this.project = project || null;
    this.onUnauthorized = () => {};
  }

  headers(json) {
    const headers = { Accept: "application/json" };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    if (this.project) headers["X-Loom-Project"] = this.project;
    if (json) headers["Content-Type"] = "application/json";
    return headers;
  }

  async request(method, path, { params, body } = {}) {
    let url = path;
    if (params) {
      const query = new URLSearchParams();
      for (const [key, value] of Object.entries(params)) {
        if (value !== null && value !== undefined && value !== "") query.set(key, String(value));
      }
      const text = query.toString();
      if (text) url += `?${text}`;
    }
    let response;
    try {
      response = await fetch(url, {
        method,
        headers: this.headers(body !== undefined),
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: "no-store",
        credentials: "omit",
      });
    } catch {
      throw new ApiError(0, "network", "Weft did not answer (is it running?)");
    }
    let data = null;
    try {
      data = await response.json();
    } catch {
      data = null;
    }
    if (!response.ok) {
      // Weft's messages name the field and the rule, never the rejected value.
      const code = data && typeof data.error === "string" ? data.error : `http_${response.status}`;
      const message = data && typeof data.message === "string" ? data.message : `Weft answered ${response.status}`;
      const error = new ApiError(response.status, code, message);
      if (response.status === 401) this.onUnauthorized(error);
      throw error;
    }
    return data;
  }

  get(path, params) {
    return this.request("GET", path, { params });
  }

  post(path, body = {}) {
    return this.request("POST", path, { body });
  }

  put(path, body = {}) {
    return this.request("PUT", path, { body });
  }

  delete(path) {
    return this.request("DELETE", path);
  }

  /** Every page of a listing (``limit`` 1000 per request), handed to ``onPage`` as it comes. */
  async all(path, params = {}, onPage = () => {}) {
    const items = [];
    let cursor = null;
    do {
      const page = await this.get(path, { ...params, limit: 1000, cursor });
      items.push(...page.items);
      onPage(page.items);
      cursor = page.next_cursor;
    } while (cursor);
    return items;
  }
}
